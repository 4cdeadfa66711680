"""A payout as an operator runs it (used by `benchmarks/payouts_e2e.py --through-cli`; not a benchmark of its
own): `payops payouts SHEET --json` with nothing but the payops server's address (the home's record) and an
operator's personal token. The sheet is uploaded, the server's runner pays it on a worker process, the CLI
follows it to the end. The figure is the command's whole wall time, from exec to exit.

The server is `payops serve` (its own Prefect server, console and runner) against an emulator started apart
(`benchmarks.emulator.fresh_emulator`: latency, rate limit, wallet sized), whose credential only the server
holds; its approval policy is "none" (the approvals have their own tests).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def operator_run(sheet: Path, label: str, env: dict[str, str]) -> dict[str, Any]:
    """`payops payouts SHEET --label LABEL --json` as the operator: wall from exec to exit, its summary."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "payops.deployments.cli", "payouts", str(sheet), "--label", label, "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"payops payouts exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    summary = json.loads(proc.stdout)
    return {
        "wall_s": round(wall, 2),
        "flow_s": summary.get("duration_s"),
        "around_the_flow_s": round(wall - float(summary.get("duration_s") or 0), 2),
        "phases_s": summary.get("phase_durations_s"),
        "outcome": summary.get("outcome"),
        "rows": summary.get("rows_total"),
        "payouts_by_status": summary.get("payouts_by_status"),
        "requests": (summary.get("rate_limit") or {}).get("acquires"),
    }
