"""Approvers are told: a run that waits posts a notice to the approvers who may act on it (never its
initiator) and emits its alert event; a reminder goes out before the deadline; the expiry is an event (the
not-approved alert, reason timeout), an audit entry and a notice, and the request records it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.sandbox import SandboxServer
from payops.store.approval_requests import ApprovalRequests
from payops.store.audit import search
from payops.store.notices import Notices
from payops.tasks.approval.approvals import sign_start

from tests.flows.approval_support import (
    approval_emulator,
    approval_policy,
    key_pair,
    payops_db,
    prefect_login_holder,
)
from tests.flows.support import emulator_stats, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxServer]:
    with approval_emulator(monkeypatch, 0.3) as server:
        yield server


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The alert events the flow emits (tasks.events.alerts), as an automation would receive them."""
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr("payops.tasks.events.alerts.default_emitter", lambda **event: seen.append(event))
    return seen


def test_waiting_reminded_and_expired_are_told(
    prefect_harness, env: SandboxServer, events: list[dict[str, Any]], tmp_path: Path
) -> None:
    sheet = write_sheet(tmp_path / "expire.xlsx", payroll_rows(2, prefix="EXP"))
    params = PayoutRunParams(
        source=str(sheet),
        label="notices-expire",
        report_dir=str(tmp_path / "r"),
        start=sign_start(key_pair()[0], source=str(sheet), initiator="olu", channel="cli"),
        approval_timeout_s=14,
        approval_reminder_s=7,
    )
    before = emulator_stats(env.base_url)["payouts"]
    with approval_policy("0:1"):
        state = asyncio.run(payout_spreadsheet(params, return_state=True))
    s = run_summary(state)
    assert (state.name, s.outcome) == ("Not approved", "not_approved")
    assert emulator_stats(env.base_url)["payouts"] == before

    names = [e["event"] for e in events]
    assert names == [
        "payops.payout-run.needs-approval",
        "payops.payout-run.approval-reminder",
        "payops.payout-run.not-approved",
    ], names
    reminder = events[1]["payload"]
    assert 0 < reminder["seconds_left"] <= 7 and reminder["label"] == "notices-expire"
    assert events[2]["payload"]["reason"] == "timeout"  # the not-approved automation says "not in time"

    with payops_db() as engine:
        run_id = events[0]["payload"]["flow_run_id"]
        request = ApprovalRequests(engine).get(run_id)
        assert request.state == "expired" and request.initiator == "olu" and request.excluded == ("olu",)
        for_bea = Notices(engine).for_user("bea", "approver", open_only=False)
        mine = [n for n in for_bea if n.flow_run_id == run_id]
        assert [n.kind for n in mine] == ["approval_expired", "approval_reminder", "approval_needed"]
        assert [n.open for n in mine] == [True, False, False]
        assert "waits for 1 approval (not olu): GHS 22.00" in mine[2].text
        for_olu = [n for n in Notices(engine).for_user("olu", "approver") if n.flow_run_id == run_id]
        assert [(n.kind, n.personal) for n in for_olu] == [("run_not_approved", True)]  # told, not asked
        assert "nobody approved it within 1 minute. Nothing was sent (2 payouts, 22.00)" in for_olu[0].text
        actions = [e.action for e in reversed(search(engine, text=run_id))]
        assert actions == [
            "payops.run.approval_requested",
            "payops.run.approval_reminded",
            "payops.run.approval_expired",
        ], actions
        requested = json.loads(search(engine, action="payops.run.approval_requested", text=run_id)[0].detail)
        assert requested["started"] == "started by olu from the CLI" and requested["required"] == 1


def test_a_run_started_through_prefect_directly_has_no_initiator_and_its_audit_says_so(
    prefect_harness, env: SandboxServer, events: list[dict[str, Any]], tmp_path: Path
) -> None:
    """No signed start: no payops initiator, and whoever holds Prefect's login (``pat``) could have started
    it, so the request excludes them and they are not asked."""
    sheet = write_sheet(tmp_path / "direct.xlsx", payroll_rows(2, prefix="DIR"))
    params = PayoutRunParams(
        source=str(sheet), label="notices-direct", report_dir=str(tmp_path / "r"), approval_timeout_s=10
    )
    with approval_policy("0:1"), prefect_login_holder("pat"):
        asyncio.run(payout_spreadsheet(params, return_state=True))
    with payops_db() as engine:
        run_id = events[0]["payload"]["flow_run_id"]
        [entry] = search(engine, action="payops.run.approval_requested", text=run_id)
        detail = json.loads(entry.detail)
        assert entry.actor == "(prefect)" and detail["channel"] == "prefect"
        assert "no payops initiator; holders of Prefect's login (pat) may not approve" in detail["started"]
        assert ApprovalRequests(engine).get(run_id).excluded == ("pat",)
        assert not [n for n in Notices(engine).for_user("pat", "approver") if n.flow_run_id == run_id]
        assert [n for n in Notices(engine).for_user("bea", "approver") if n.flow_run_id == run_id]
