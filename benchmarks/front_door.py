"""The CLI's payout through the payops server against today's direct path, on one `payops serve --sandbox`
(used by benchmarks/cli.py, which prints the figures; not a benchmark of its own).

* ``direct``: `payops payouts SHEET --dry-run --json` running the flow in its own process, against serve's
  Prefect server (with its login) and emulator, in a payops home of its own (no payops server known): what
  an operator holding the host's settings ran before the front door;
* ``through_server``: the same command with nothing but serve's address (the home's record) and an operator's
  personal token: the sheet is uploaded, serve's runner pays it on a worker process, the CLI follows it.

Runs alternate (direct, through, direct, ...) so both see the same machine; medians and their ratio.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.payops_server import payops_server

TARGET_RATIO = 1.10


def compare(
    tmp: Path, base: dict[str, str], sheet: Path, repeat: int, timed: Callable[..., dict[str, Any]]
) -> dict[str, Any]:
    """Medians of the direct path and the path through the server (``timed(args, env)`` runs one
    command), alternating, after one warm-up of each."""
    from payops.deployments.processes import read_env_file

    with payops_server(tmp, base, sandbox=True) as serve:
        record = serve["record"]
        assert record.sandbox_env_file
        emulator = read_env_file(Path(record.sandbox_env_file))
        login = (serve["home"] / "prefect-auth").read_text().strip()
        direct_env = {
            **serve["env"],
            **emulator,
            "PAYOPS_HOME": str(tmp / "direct-home"),
            "PREFECT_API_URL": record.prefect_api_url,
            "PREFECT_API_AUTH_STRING": login,
        }
        through_env = {**serve["env"], "PAYOPS_API_TOKEN": serve["token"]}  # no credential, no key, no URL
        dry = ["payouts", str(sheet), "--dry-run", "--json"]
        timed(dry, direct_env), timed(dry, through_env)  # warm-up: lookup caches, bytecode
        direct, through = [], []
        for _ in range(repeat):
            direct.append(timed(dry, direct_env))
            through.append(timed(dry, through_env))
    direct_s = statistics.median(float(r["seconds"]) for r in direct)
    through_s = statistics.median(float(r["seconds"]) for r in through)
    return {
        "direct": {"median_s": direct_s, "samples": direct},
        "through_server": {"median_s": through_s, "samples": through},
        "ratio": round(through_s / direct_s, 3),
        "target_ratio_le": TARGET_RATIO,
        "ok": through_s <= TARGET_RATIO * direct_s and all(r["exit"] == 0 for r in [*direct, *through]),
    }
