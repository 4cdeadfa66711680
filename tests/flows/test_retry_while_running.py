"""Failed rows retried while their run still polls the others: every failed row is paid again at most once,
whatever comes after (the run ending, `retry-failed` after it, a retry of the retry, a re-run of the run).

Real `payops` processes against the emulator: two rows fail at once (destinations ending 0001, 0002); the run
keeps polling because one payout is held (0004) and its settle window is long, until the test fails that
payout by hand (a late failure). Retries run with a short settle window: the retried held row is held again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from openpyxl import load_workbook
from payops.sandbox import SandboxConfig, SandboxServer
from payops.sandbox.engine.payouts import transition
from payops.store import PayopsSettings, upgrade_database
from payops.store.approvals import state_policy
from payops.store.retries import RetryRows

from tests.flows.support import REPO, cli_env, emulator_stats, payroll_rows, run_payops, write_sheet

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.5)) as s:
        yield s


def _resubmit_references(report: Path) -> list[str]:
    book = load_workbook(report, read_only=True)
    header, *rows = book["resubmit"].iter_rows(values_only=True)
    return [dict(zip(header, r, strict=True))["reference"] for r in rows]


def _recorded(label: str, count: int, parent: subprocess.Popen[str]) -> None:
    """Wait until run ``label`` has recorded ``count`` failed rows (it still runs)."""
    engine = upgrade_database(PayopsSettings.from_env())
    try:
        deadline = time.monotonic() + 120
        while len(RetryRows(engine).unclaimed(label)) < count:
            assert parent.poll() is None, parent.communicate()
            assert time.monotonic() < deadline, "the run did not record its failed rows"
            time.sleep(0.3)
    finally:
        engine.dispose()


def test_rows_retried_while_the_run_polls_are_paid_again_once_whatever_comes_after(
    prefect_harness, server: SandboxServer, tmp_path: Path
) -> None:
    engine = upgrade_database(PayopsSettings.from_env())
    state_policy(engine, "none")  # every retry is a payout run under the approval policy: here, none
    engine.dispose()
    reports = tmp_path / "reports"
    # rows 3 and 4 fail at once, row 5 is held (failed by hand below)
    rows = payroll_rows(6, prefix="ERY", specials={1: "0001", 2: "0002", 3: "0004"})
    sheet = write_sheet(tmp_path / "early.xlsx", rows)
    common = ["--report-dir", str(reports), "--no-name-check", "--settle-window", "1", "--json"]
    pay = ["payouts", str(sheet), "--label", "early", "--report-dir", str(reports), "--no-name-check"]
    before = emulator_stats(server.base_url)["payouts"]

    parent = subprocess.Popen(
        [sys.executable, "-m", "payops.deployments.cli", *pay, "--settle-window", "300", "--json"],
        env=cli_env(server.env),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _recorded("early", 2, parent)
        early = run_payops(["payouts", "retry-failed", "early", *common], server.env, timeout=180)
        assert early.returncode == 0, early.stderr
        assert parent.poll() is None  # the run still waits for the held payout
        first = json.loads(early.stdout)
        assert first["label"] == "early-retry1" and first["rows_total"] == 2
        assert first["payouts_by_status"] == {"failed": 2}  # the same destinations fail again, paid once
        book = load_workbook(reports / "early-retry1-sheet.xlsx", read_only=True)
        header, *cells = book["payouts"].iter_rows(values_only=True)
        assert sorted(dict(zip(header, r, strict=True))["reference"] for r in cells) == [
            "ERY-00001-rs1",
            "ERY-00002-rs1",
        ]

        with server.state.lock:  # the held payout fails at last: every payout is final, the run ends
            account = server.state.env("demo", "test")
            payout = account.payouts["ERY-00003"]
            transition(account, payout, "failed", "account_not_found", datetime.now(UTC))
        out, err = parent.communicate(timeout=120)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.communicate()
    assert parent.returncode == 0, err
    summary = json.loads(out)
    assert summary["payouts_by_status"] == {"delivered": 3, "failed": 3}
    assert summary["retried_rows"] == {"ERY-00001": "early-retry1", "ERY-00002": "early-retry1"}
    attention = [(a["row"], a["kind"]) for a in summary["attention_rows"]]
    assert attention == [(5, "failed")]
    assert _resubmit_references(reports / "early.xlsx") == ["ERY-00003-rs1"]

    # After the run: retry-failed pays only the row no retry took yet, under the next free label.
    after = run_payops(["payouts", "retry-failed", "early", *common], server.env, timeout=180)
    assert after.returncode == 0, after.stderr
    second = json.loads(after.stdout)
    assert second["label"] == "early-retry2" and second["rows_total"] == 1
    assert second["payouts_by_status"] == {"held": 1}  # the same destination is held again
    assert emulator_stats(server.base_url)["payouts"] - before == 6 + 3  # rows + failed payouts

    refused = run_payops(["payouts", "retry-failed", "early", *common], server.env, timeout=180)
    assert refused.returncode == 2
    assert "a retry of early already ran as early-retry1, early-retry2" in refused.stderr

    # A crashed run started again under its label replays, and still leaves the retried rows out.
    rerun = run_payops([*pay, "--settle-window", "1", "--json"], server.env, timeout=180)
    assert rerun.returncode == 0, rerun.stderr
    again = json.loads(rerun.stdout)
    assert again["replayed_payouts"] == 6
    assert set(again["retried_rows"]) == {"ERY-00001", "ERY-00002", "ERY-00003"}
    assert again["attention_rows"] == []
    assert _resubmit_references(reports / "early.xlsx") == []
    refused = run_payops(["payouts", "retry-failed", "early", *common], server.env, timeout=180)
    assert refused.returncode == 2

    # A retry of the first retry takes the family's next free label: nothing shares a label or a row.
    chained = run_payops(["payouts", "retry-failed", "early-retry1", *common], server.env, timeout=180)
    assert chained.returncode == 0, chained.stderr
    third = json.loads(chained.stdout)
    assert third["label"] == "early-retry3" and third["rows_total"] == 2
    assert emulator_stats(server.base_url)["payouts"] - before == 6 + 3 + 2
