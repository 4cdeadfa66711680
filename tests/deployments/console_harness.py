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
from openpyxl import Workbook

PASSWORD = "correct horse battery staple"
HEADERS = [
    "reference",
    "payee name",
    "amount",
    "currency",
    "provider",
    "destination type",
    "destination",
    "note",
]
TEST_ENDINGS = {"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0404", "0502", "0504"}


def payroll_rows(n: int, *, prefix: str, specials: dict[int, str] | None = None) -> list[list[str]]:
    """``n`` valid rows; ``specials`` maps a row index to the destination's last four digits."""
    specials = specials or {}
    rows = []
    for i in range(n):
        dest = f"23324{i:07d}"
        if dest[-4:] in TEST_ENDINGS:
            dest = dest[:-4] + "9999"
        if i in specials:
            dest = dest[:-4] + specials[i]
        rows.append([f"{prefix}-{i:05d}", "", f"{10 + i % 7}.50", "GHS", "mtn", "msisdn", dest, f"pay {i}"])
    return rows


def write_sheet(path: Path, rows: list[list[str]]) -> Path:
    wb = Workbook(write_only=True)
    ws = wb.create_sheet("payouts")
    ws.append(HEADERS)
    for row in rows:
        ws.append(row)
    wb.save(path)
    return path


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
