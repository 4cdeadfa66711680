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
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVE_START_S = 240


@contextmanager
def payops_server(tmp: Path, base: dict[str, str]) -> Iterator[dict[str, Any]]:
    """`payops serve` in ``tmp/serve-home`` against the emulator in ``base`` (its credential), policy "none",
    an operator ``bench`` with a personal token; stopped (its process group) at the end."""
    from payops.store import PayopsSettings, upgrade_database
    from payops.store.approvals import state_policy
    from payops.store.users import Users

    home = tmp / "serve-home"
    env = {**base, "PAYOPS_HOME": str(home), "PREFECT_HOME": str(tmp / "serve-prefect")}
    for key in ("PAYOPS_DATABASE_URL", "PREFECT_API_URL", "PREFECT_API_AUTH_STRING"):
        env.pop(key, None)
    engine = upgrade_database(PayopsSettings(home=home))
    state_policy(engine, "none")
    users = Users(engine)
    users.add("bench", "operator", secrets.token_urlsafe(18))
    token = users.issue_token("bench", "benchmark")
    engine.dispose()
    log = tmp / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "payops.deployments.cli", "serve"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + SERVE_START_S
        while "serving" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"payops serve did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        operator = {k: v for k, v in env.items() if not k.startswith("PAYOPS_") or k == "PAYOPS_HOME"}
        yield {"home": home, "operator_env": {**operator, "PAYOPS_API_TOKEN": token}, "log": log}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


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
        "outcome": summary.get("outcome"),
        "rows": summary.get("rows_total"),
        "payouts_by_status": summary.get("payouts_by_status"),
        "requests": (summary.get("rate_limit") or {}).get("acquires"),
    }
