"""`payops serve` for a benchmark (used by `benchmarks/front_door.py` and `benchmarks/through_cli.py`; not a
benchmark of its own): in a home of its own with the approval policy "none" (the approvals have their own
tests) and an operator ``bench`` holding a personal token, made on the host as `payops host` would; stopped,
its whole process group, when the block ends."""

from __future__ import annotations

import secrets
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
def payops_server(tmp: Path, base: dict[str, str], *, sandbox: bool = False) -> Iterator[dict[str, Any]]:
    """`payops serve` (``--sandbox``: with its own emulator; else against the service ``base`` names, whose
    credential only the server holds) in ``tmp/serve-home``. Yields its ``home``, the ``env`` it runs with,
    the operator's ``token``, its ``record`` (`store.home.ServeRecord`) and ``operator_env``: what an
    operator's shell holds (the home, the token; no credential, key or Prefect URL)."""
    from payops.deployments.processes import stop_child
    from payops.store import PayopsSettings, upgrade_database
    from payops.store.approvals import state_policy
    from payops.store.home import read_serve_record
    from payops.store.users import Users

    home = tmp / "serve-home"
    env = {**base, "PAYOPS_HOME": str(home), "PREFECT_HOME": str(tmp / "serve-prefect")}
    for key in ("PAYOPS_DATABASE_URL", "PREFECT_API_URL", "PREFECT_API_AUTH_STRING"):
        env.pop(key, None)
    if sandbox:  # the emulator's credential comes from serve's own emulator
        for key in [k for k in env if k.startswith("PAYOPS_") and k != "PAYOPS_HOME"]:
            del env[key]
    engine = upgrade_database(PayopsSettings(home=home))
    state_policy(engine, "none")
    users = Users(engine)
    users.add("bench", "operator", secrets.token_urlsafe(18))
    token = users.issue_token("bench", "benchmark")
    engine.dispose()
    log = tmp / "serve.log"
    command = [sys.executable, "-m", "payops.deployments.cli", "serve", *(["--sandbox"] if sandbox else [])]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + SERVE_START_S
        while "serving" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"payops serve did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        record = read_serve_record(home)
        assert record is not None
        operator = {k: v for k, v in env.items() if not k.startswith("PAYOPS_") or k == "PAYOPS_HOME"}
        yield {
            "home": home,
            "env": env,
            "token": token,
            "record": record,
            "operator_env": {**operator, "PAYOPS_API_TOKEN": token},
        }
    finally:
        stop_child(proc, timeout=30)  # its process group: SIGTERM, SIGKILL after 30 s
