"""Support for flow tests: payout sheets, emulator stats, an ASGI app served on 127.0.0.1 in a thread."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from openpyxl import Workbook

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


def payroll_rows(n: int, *, prefix: str = "T", specials: dict[int, str] | None = None) -> list[list[str]]:
    """`n` valid rows; `specials` maps a 0-based index to the destination's last four digits (test values)."""
    specials = specials or {}
    rows = []
    for i in range(n):
        dest = f"23324{i:07d}"
        if dest[-4:] in {"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0404", "0502", "0504"}:
            dest = dest[:-4] + "9999"
        if i in specials:
            dest = dest[:-4] + specials[i]
        rows.append([f"{prefix}-{i:05d}", "", f"{10 + i % 7}.50", "GHS", "mtn", "msisdn", dest, f"pay {i}"])
    return rows


def write_sheet(path: Path, rows: Iterable[list[str]], headers: list[str] = HEADERS) -> Path:
    wb = Workbook(write_only=True)
    ws = wb.create_sheet("payouts")
    ws.append(headers)
    for r in rows:
        ws.append(r)
    wb.save(path)
    return path


def emulator_stats(base_url: str) -> dict:
    """The demo business's test-environment figures from the emulator's admin stats."""
    import httpx

    data = httpx.get(f"{base_url}/_sandbox/stats", timeout=10).json()
    return {**data["businesses"]["demo"]["test"], "requests": data["requests"]}


@contextmanager
def serve_in_thread(app) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free 127.0.0.1 port; yields the base URL; stops on exit."""
    import socket
    import threading
    import time

    import httpx
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(f"{base}/openapi.json", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(10)


class StatusCounter:
    """ASGI middleware counting the response statuses an app sent (to prove faults and 429s happened)."""

    def __init__(self, app) -> None:
        from collections import Counter

        self.app = app
        self.statuses: Counter[int] = Counter()

    async def __call__(self, scope, receive, send) -> None:
        async def counting(message) -> None:
            if message["type"] == "http.response.start":
                self.statuses[message["status"]] += 1
            await send(message)

        await self.app(scope, receive, counting)


def demo_env(base: str) -> dict[str, str]:
    """Client settings for the emulator's demo business (test environment)."""
    return {
        "PAYOPS_BASE_URL": base,
        "PAYOPS_AUTH_URL": f"{base}/auth",
        "PAYOPS_CLIENT_ID": "demo-test-client",
        "PAYOPS_CLIENT_SECRET": "demo-test-secret",
        "PAYOPS_RESOURCE": "urn:payments-api",
    }


REPO = Path(__file__).resolve().parents[2]


def cli_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a `payops` subprocess: this process's, no PAYOPS_ settings, the session's Prefect
    test server, then ``extra`` (e.g. the emulator's credentials)."""
    import os

    from prefect.settings import PREFECT_API_URL

    full = {k: v for k, v in os.environ.items() if not k.startswith("PAYOPS_")}
    return full | {"PREFECT_API_URL": PREFECT_API_URL.value(), **extra}


def run_payops(args: list[str], env: dict[str, str], timeout: float = 120):
    """`payops ARGS` as an operator runs it (a subprocess); it never prints a traceback."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "deployments.cli", *args],
        env=cli_env(env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    return proc
