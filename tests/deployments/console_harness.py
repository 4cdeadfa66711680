"""Helpers for console tests: serve an ASGI app on 127.0.0.1 in a thread; build payout sheets."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from benchmarks.sheets import HEADERS, TEST_ENDINGS, payroll_rows, write_sheet

__all__ = ["HEADERS", "PASSWORD", "TEST_ENDINGS", "payroll_rows", "write_sheet"]

PASSWORD = "correct horse battery staple"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """``app`` on uvicorn at ``http://127.0.0.1:PORT`` until the block ends."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name=f"console-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the console did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def payops(env: dict[str, str], *args: str, stdin: str = "", timeout: float = 240) -> Any:
    """``payops ARGS`` as a person runs it in ``env`` (a subprocess; ``stdin`` for a password); never a
    traceback."""
    import subprocess
    import sys

    from payops.deployments.processes import ROOT

    done = subprocess.run(
        [sys.executable, "-m", "payops.deployments.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr[-2000:]
    return done


def good_sheet(path: Path, n: int = 6, prefix: str = "CON") -> Path:
    return write_sheet(path, payroll_rows(n, prefix=prefix, specials={1: "0002"}))


def bad_sheet(path: Path) -> Path:
    rows = payroll_rows(4, prefix="BAD")
    rows[1][2] = "twelve"  # amount
    rows[2][4] = "pigeon-post"  # provider
    return write_sheet(path, rows)
