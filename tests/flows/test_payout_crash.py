"""Crash recovery: `payops payouts` killed with SIGKILL at many points; a re-run pays each row once.

The emulator runs in this process behind a kill switch: when the chosen request arrives (before its effect) or
when its answer starts (effect committed, answer lost on the wire), the switch SIGKILLs the CLI process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from openpyxl import load_workbook
from payops.sandbox import SandboxConfig, create_app
from payops.store.cache import LookupCache

from tests.flows.approval_support import payops_db
from tests.flows.support import emulator_stats, payroll_rows, serve_in_thread, write_csv, write_sheet

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


@dataclass
class KillPoint:
    method: str
    path: str
    nth: int
    when: str  # "before": at arrival, nothing done; "after": effect committed, answer never delivered


class KillSwitch:
    """ASGI middleware that kills the client process at one chosen request."""

    def __init__(self, app) -> None:
        self.app = app
        self.pid: int | None = None
        self.point: KillPoint | None = None
        self.count = 0
        self.fired = threading.Event()

    def arm(self, pid: int, point: KillPoint) -> None:
        self.pid, self.point, self.count = pid, point, 0
        self.fired.clear()

    def _kill(self) -> None:
        if self.pid and not self.fired.is_set():
            self.fired.set()  # before the kill: the waiting test thread may see the exit first
            os.kill(self.pid, signal.SIGKILL)

    async def __call__(self, scope, receive, send) -> None:
        p = self.point
        if scope["type"] != "http" or p is None or self.fired.is_set():
            return await self.app(scope, receive, send)
        if scope["method"] == p.method and scope["path"] == p.path:
            self.count += 1
            if self.count == p.nth:
                if p.when == "before":
                    self._kill()
                    return await self.app(scope, receive, send)

                async def send_then_kill(message) -> None:
                    if message["type"] == "http.response.start":
                        self._kill()
                    await send(message)

                return await self.app(scope, receive, send_then_kill)
        return await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[str, KillSwitch]]:
    switch = KillSwitch(create_app(SandboxConfig(delivery_delay_s=1.5)))
    with serve_in_thread(switch) as base:
        yield base, switch


POINTS = [
    KillPoint("POST", "/v1/payout-batches", 1, "before"),
    KillPoint("POST", "/v1/payout-batches", 2, "after"),
    KillPoint("GET", "/v1/fee-quotes/payouts", 1, "after"),
    KillPoint("POST", "/auth/v1/oauth/token", 1, "after"),
    KillPoint("POST", "/v1/payout-batches", 4, "after"),
    KillPoint("GET", "/v1/wallet", 1, "before"),
    KillPoint("POST", "/v1/payout-batches", 6, "after"),
    KillPoint("GET", "/v1/transactions", 1, "after"),
    KillPoint("POST", "/v1/payout-batches", 5, "after"),
    KillPoint("GET", "/v1/transactions", 2, "after"),
]


SPILLED_POINTS = [POINTS[0], POINTS[1], POINTS[4], POINTS[7]]
"""A csv read in chunks into a spill file sends and polls a part at a time (`flows/payout_parts.py`): killed
before and after a batch, and while polling."""


@pytest.mark.parametrize(
    ("kind", "points"), [("xlsx", POINTS), ("csv", SPILLED_POINTS)], ids=["held xlsx", "spilled csv"]
)
def test_sigkill_at_many_points_then_rerun_pays_each_row_once(
    prefect_harness, emulator, tmp_path: Path, kind: str, points: list[KillPoint]
) -> None:
    from prefect.settings import PREFECT_API_URL

    base, switch = emulator
    before = emulator_stats(base)["payouts"]
    label = f"crash-{kind}"
    rows = payroll_rows(600, prefix=f"CR{kind}", specials={10: "0001"})
    sheet = (
        write_sheet(tmp_path / "input.xlsx", rows)
        if kind == "xlsx"
        else write_csv(tmp_path / "input.csv", rows)
    )
    reports = tmp_path / "reports"
    scratch = tmp_path / "tmp"  # the runs' temporary directory: where their spill files go
    scratch.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "PAYOPS_STREAM_CSV_OVER_BYTES": "0",  # every csv read in chunks into a spill file
        "PREFECT_API_URL": PREFECT_API_URL.value(),
        "PAYOPS_BASE_URL": base,
        "PAYOPS_AUTH_URL": f"{base}/auth",
        "PAYOPS_CLIENT_ID": "demo-test-client",
        "PAYOPS_CLIENT_SECRET": "demo-test-secret",
        "PAYOPS_RESOURCE": "urn:payments-api",
    }
    cmd = [
        sys.executable,
        "-m",
        "payops.deployments.cli",
        "payouts",
        str(sheet),
        "--label",
        label,
        "--report-dir",
        str(reports),
        "--json",
        "--poll-deadline",
        "120",
    ]
    for point in points:
        # A cold lookup cache each time, so the pre-flight's kill points are reached again after a run that
        # died later; what must hold across runs is the service's idempotency.
        with payops_db() as engine:
            LookupCache(engine).clear()
        proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        switch.arm(proc.pid, point)
        code = proc.wait(timeout=180)
        assert switch.fired.is_set() and code == -signal.SIGKILL, f"kill point {point} never fired ({code})"
    switch.point = None
    left = sorted(p.name for p in scratch.glob("payops-run-*"))
    if kind == "csv":  # a killed run cannot delete its spill file
        assert left, "no spill directory was left by the killed runs"
    final = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert final.returncode == 0, final.stderr[-2000:]
    summary = json.loads(final.stdout)
    # the last run swept what the killed ones left (their processes are gone) and deleted its own
    assert sorted(p.name for p in scratch.glob("payops-*")) == [], left

    assert emulator_stats(base)["payouts"] - before == 600  # every valid row paid, none twice
    assert summary["payouts_by_status"] == {"delivered": 599, "failed": 1}
    assert summary["replayed_payouts"] == 600  # the killed runs had sent everything before the last run
    assert summary["parts"] == 1  # 600 rows: one part, held or spilled (the spill: the scratch above)
    results = list(
        load_workbook(reports / f"{label}.xlsx", read_only=True)["results"].iter_rows(values_only=True)
    )
    status = results[0].index("Payout status")
    assert len(results) == 602 and results[-1][0] == "Total: 600 rows"  # the totals row under the rows
    assert {r[status] for r in results[1:-1]} == {"delivered", "failed"}
