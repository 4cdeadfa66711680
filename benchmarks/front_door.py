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

import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVE_START_S = 180
TARGET_RATIO = 1.10


@contextmanager
def served(tmp: Path, base: dict[str, str]) -> Iterator[dict[str, Any]]:
    """`payops serve --sandbox` in ``tmp/serve-home`` with the policy "none" and an operator ``bench`` with
    a personal token (made on the host, as `payops host` would); stopped (its process group) at the end."""
    from payops.store import PayopsSettings, upgrade_database
    from payops.store.approvals import state_policy
    from payops.store.home import read_serve_record
    from payops.store.users import Users

    home = tmp / "serve-home"
    env = {**base, "PAYOPS_HOME": str(home), "PREFECT_HOME": str(tmp / "serve-prefect")}
    for key in [k for k in env if k.startswith("PAYOPS_") and k not in ("PAYOPS_HOME",)]:
        del env[key]
    settings = PayopsSettings(home=home)
    engine = upgrade_database(settings)
    state_policy(engine, "none")
    users = Users(engine)
    users.add("bench", "operator", secrets.token_urlsafe(18))
    token = users.issue_token("bench", "benchmark")
    engine.dispose()
    log = tmp / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "payops.deployments.cli", "serve", "--sandbox"],
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
        record = read_serve_record(home)
        assert record is not None and record.sandbox_env_file
        yield {"home": home, "env": env, "token": token, "record": record}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def compare(
    tmp: Path, base: dict[str, str], sheet: Path, repeat: int, timed: Callable[..., dict[str, Any]]
) -> dict[str, Any]:
    """Medians of the direct path and the path through the server (``timed(args, env)`` runs one
    command), alternating, after one warm-up of each."""
    from payops.deployments.processes import read_env_file

    with served(tmp, base) as serve:
        record = serve["record"]
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
