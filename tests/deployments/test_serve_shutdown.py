"""`payops serve` stops within seconds: SIGTERM sent to its own process (as a supervisor does), with a payout
run waiting for approval and every core busy, ends that run's process, every child and serve itself within
`SHUTDOWN_S` (Ctrl-C/SIGINT: the end of tests/deployments/test_serve_all_in_one.py)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from payops.deployments.processes import ROOT
from payops.deployments.serve import SHUTDOWN_S

from tests.deployments.serve_harness import all_in_one, busy_machine

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]

SHEET = ROOT / "examples" / "payouts-demo.xlsx"


def test_sigterm_stops_serve_and_everything_under_it_within_seconds_on_a_busy_machine(tmp_path: Path) -> None:
    with all_in_one(tmp_path, {}, {"PREFECT_SERVER_UI_ENABLED": "false"}) as served:
        run_id = served.start_run("payout-spreadsheet", {"source": str(SHEET), "require_approval": True})
        assert served.wait_state(run_id, {"PAUSED", "COMPLETED", "FAILED", "CRASHED"}) == "PAUSED"
        with busy_machine():
            took, alive = served.stop_with(signal.SIGTERM)
    log = served.log.read_text()
    assert took < SHUTDOWN_S, f"stopped after {took:.1f} s:\n{log[-2000:]}"
    assert alive == [], f"left running: {[p.cmdline() for p in alive]}"
    assert served.proc.returncode == 0
    assert "SIGTERM received: stopping everything" in log and log.rstrip().endswith("stopped")
