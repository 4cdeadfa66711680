"""A second payment needs the approver's word (issue 47): a run whose rows another run paid lately (same payee
number, amount and currency, sent with other references) records the earlier run with its approval request
and a ``paid_before`` finding; an approval without acknowledging it is refused, with it the run pays."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from payops.deployments.approving import DecisionError
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.sandbox import SandboxServer
from payops.store.approval_requests import ApprovalRequests
from payops.tasks.approval.approvals import sign_start
from payops.tasks.payouts.paid_before import PAID_BEFORE

from tests.flows.approval_support import approval_emulator, decide_as, key_pair, payops_db, run_paused
from tests.flows.support import emulator_stats, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxServer]:
    with approval_emulator(monkeypatch, 0.2) as server:
        yield server


def test_a_second_payment_is_refused_without_the_acknowledgement_and_paid_with_it(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    tag = uuid4().hex[:6]
    sheet = write_sheet(tmp_path / "payroll.xlsx", payroll_rows(3, prefix=f"PB{tag}"))
    first = PayoutRunParams(source=str(sheet), label=f"pb-nov-{tag}", report_dir=str(tmp_path / "r"))
    done = asyncio.run(payout_spreadsheet.with_options(flow_run_name=first.label)(first, return_state=True))
    assert run_summary(done).as_json()["outcome"] == "completed"
    paid = emulator_stats(env.base_url)["payouts"]

    # The same payees and amounts in a sheet of its own references: sending it pays them again.
    again = write_sheet(tmp_path / "payroll-again.xlsx", payroll_rows(3, prefix=f"PD{tag}"))
    start = sign_start(key_pair()[0], source=str(again), initiator="olu", channel="cli")
    second = PayoutRunParams(
        source=str(again),
        label=f"pb-dec-{tag}",
        report_dir=str(tmp_path / "r"),
        start=start,
        require_approval=True,
    )

    async def approve(run_id: str, description: str) -> None:
        with payops_db() as engine:
            request = ApprovalRequests(engine).get(run_id)
        assert request is not None and request.findings[PAID_BEFORE] == [2, 3, 4]
        (earlier,) = [e for e in request.paid_before if e["label"] == first.label]
        assert (earlier["matched"], earlier["paid_again"], earlier["same_sheet"]) == (3, 3, False)
        assert "paid recently by another run: approving pays them a second time" in description
        others = [k for k in request.findings if k != PAID_BEFORE]
        with pytest.raises(DecisionError) as refused:
            await decide_as(run_id, "bea", acknowledge=others)
        assert refused.value.status == 400
        assert "3 paid recently by another run: approving pays them a second time (rows 2, 3, 4)" in str(
            refused.value
        )
        assert emulator_stats(env.base_url)["payouts"] == paid  # nothing sent meanwhile
        assert "continues" in await decide_as(run_id, "bea", acknowledge=[*others, PAID_BEFORE])

    flow = payout_spreadsheet.with_options(flow_run_name=second.label)
    _, _, state = run_paused(lambda: flow(second, return_state=True), second.label, approve)
    summary = run_summary(state).as_json()
    assert summary["outcome"] == "completed" and summary["approval"]["approvers"] == ["bea"]
    said = f"paid before: run {first.label} sent 3 of this sheet's 3 rows (same payee number, amount and"
    assert any(n.startswith(said) for n in summary["notes"])
    assert emulator_stats(env.base_url)["payouts"] == paid + 3  # a deliberate second payment
