"""Support for flow tests: payout sheets, emulator stats, an ASGI app served on 127.0.0.1 in a thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.payroll import write_csv
from benchmarks.sheets import HEADERS, payroll_rows, write_sheet

__all__ = [
    "HEADERS",
    "REPO",
    "cli_env",
    "emulator_stats",
    "in_emulator_env",
    "payroll_rows",
    "run_payops",
    "serve_in_thread",
    "write_csv",
    "write_sheet",
]


def emulator_stats(base_url: str) -> dict:
    """The demo business's test-environment figures from the emulator's admin stats."""
    import httpx

    data = httpx.get(f"{base_url}/_sandbox/stats", timeout=10).json()
    return {**data["businesses"]["demo"]["test"], "requests": data["requests"]}


def in_emulator_env(server, monkeypatch):
    """Point this test's in-process flows at the emulator ``server`` (its client settings as PAYOPS_* env)."""
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    return server


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
    """The environment of a `payops` subprocess: this process's, no PAYOPS_ settings but the test session's
    isolation (its own payops home, no borrowed `payops serve`), the session's Prefect test server, then
    ``extra`` (e.g. the emulator's credentials)."""
    import os

    from prefect.settings import PREFECT_API_URL

    isolation = {"PAYOPS_HOME", "PAYOPS_API_TOKEN"}
    full = {k: v for k, v in os.environ.items() if not k.startswith("PAYOPS_") or k in isolation}
    return full | {"PREFECT_API_URL": PREFECT_API_URL.value(), **extra}


def run_payops(args: list[str], env: dict[str, str], timeout: float = 120):
    """`payops ARGS` as an operator runs it (a subprocess); it never prints a traceback."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "payops.deployments.cli", *args],
        env=cli_env(env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    return proc
