"""A held payout ends its run within the settle window (not at the poll deadline), reported as awaiting
review; when it later moves, the follow-up updates the run's JSON summary and run record (emulator, Prefect
test server)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from payops.deployments.run_history import find_payout_run
from payops.flows.followup import FollowupParams, payout_followup
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.sandbox import SandboxConfig, SandboxServer
from payops.sandbox.engine.payouts import transition

from tests.flows.support import in_emulator_env, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.5)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> SandboxServer:
    return in_emulator_env(server, monkeypatch)


def test_a_held_payout_ends_the_run_at_the_settle_window_and_its_later_move_updates_the_record(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    rows = payroll_rows(4, prefix="HLD", specials={1: "0004", 2: "0001"})  # row 3 held, row 4 fails
    sheet = write_sheet(tmp_path / "held.xlsx", rows)
    reports = str(tmp_path / "reports")
    params = PayoutRunParams(
        source=str(sheet),
        label="held-run",
        report_dir=reports,
        poll_deadline_s=300,
        settle_window_s=2,
        check_names=False,
    )
    started = time.monotonic()
    summary = run_summary(asyncio.run(payout_spreadsheet(params, return_state=True))).as_json()
    elapsed = time.monotonic() - started
    assert elapsed < 60, elapsed  # the poll deadline was 300 s
    assert summary["settle_window_reached"] and not summary["deadline_reached"]
    assert summary["payouts_by_status"] == {"delivered": 2, "failed": 1, "held": 1}
    assert summary["awaiting_review"] == ["HLD-00001"]
    assert summary["waiting_statuses"] == {"HLD-00001": "held"}
    held = [a for a in summary["attention_rows"] if a["kind"] == "awaiting_review"]
    assert [(a["row"], a["reference"], a["status"], a["paid"]) for a in held] == [
        (3, "HLD-00001", "held", "not yet")
    ]
    record = asyncio.run(find_payout_run("held-run"))
    assert record is not None and record.awaiting_review == 1

    # The provider's reviewer releases the payout: the service delivers it (and sends its webhook).
    state = env.state
    with state.lock:
        account = state.env("demo", "test")
        transition(account, account.payouts["HLD-00001"], "delivered", None, datetime.now(UTC))

    followed = run_summary(
        asyncio.run(payout_followup(FollowupParams(label="held-run", report_dir=reports), return_state=True))
    )
    assert followed.moved == {"held-run": {"HLD-00001": ["held", "delivered"]}}
    assert followed.still_waiting == 0

    after = json.loads((Path(reports) / "held-run.json").read_text())
    assert after["payouts_by_status"] == {"delivered": 3, "failed": 1}
    assert after["awaiting_review"] == [] and after["not_final"] == [] and after["waiting_statuses"] == {}
    assert [a["kind"] for a in after["attention_rows"]] == ["failed"]
    assert after["followed_up"][0]["moved"] == {"HLD-00001": ["held", "delivered"]}
    record = asyncio.run(find_payout_run("held-run"))
    assert record is not None and record.awaiting_review == 0
    assert record.payouts_by_status == {"delivered": 3, "failed": 1}

    # Nothing waits any more: a second follow-up (the webhook's trigger) reads nothing, changes nothing.
    again = run_summary(
        asyncio.run(payout_followup(FollowupParams(label="held-run", report_dir=reports), return_state=True))
    )
    assert again.moved == {} and json.loads((Path(reports) / "held-run.json").read_text()) == after
