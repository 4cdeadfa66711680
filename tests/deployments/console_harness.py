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


def good_sheet(path: Path, n: int = 6, prefix: str = "CON") -> Path:
    return write_sheet(path, payroll_rows(n, prefix=prefix, specials={1: "0002"}))


def bad_sheet(path: Path) -> Path:
    rows = payroll_rows(4, prefix="BAD")
    rows[1][2] = "twelve"  # amount
    rows[2][4] = "pigeon-post"  # provider
    return write_sheet(path, rows)
