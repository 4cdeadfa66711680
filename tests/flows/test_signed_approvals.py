"""The payout flow accepts a resume only with approvals it can verify (tasks/approvals.py): a resume from
the Prefect API with ``approve: true`` and no valid signature is a rejection saying why; nothing is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from flows.outcomes import run_summary
from flows.payouts import PayoutRunParams, payout_spreadsheet
from sandbox import SandboxConfig, SandboxServer
from store.approvals import parse_tiers
from tasks.approvals import sign_approval, sign_rule
from tests.flows.support import emulator_stats, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e

KEY = b"signed-approvals-test-key-0123456789"
TOTAL = Decimal("34.50")  # three rows of payroll_rows


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


async def _paused(name: str, timeout: float = 60) -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    async with get_client() as client:
        for _ in range(int(timeout * 4)):
            runs = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name]))
            )
            if runs and runs[0].state and runs[0].state.is_paused():
                return str(runs[0].id)
            await asyncio.sleep(0.25)
    raise AssertionError("the run never paused for approval")


def _approvals(case: str, run_id: str) -> list[str]:
    sign = lambda who, run=run_id, total=TOTAL: sign_approval(KEY, run_id=run, total=total, approver=who)  # noqa: E731
    return {
        "no signature": [],
        "forged signature": [
            sign_approval(b"not-the-key-0123456789", run_id=run_id, total=TOTAL, approver="bea")
        ],
        "another run": [sign("bea", run="00000000-0000-0000-0000-000000000000"), sign("cat")],
        "lower total": [sign("bea", total=Decimal("1.00")), sign("cat", total=Decimal("1.00"))],
        "one approver": [sign("bea")],
        "same approver twice": [sign("bea"), sign("bea")],
        "initiator approves": [sign("olu"), sign("bea")],
        "two approvers": [sign("bea"), sign("cat")],
    }[case]


REASONS = {
    "no signature": "this run needs 2 signed approvals, got 0 valid signed approvals",
    "forged signature": "an approval is not signed by the console's key",
    "another run": "the approval by bea was signed for another run",
    "lower total": "the approval by bea was signed for a total of 1.00, this run pays 34.50",
    "one approver": "this run needs 2 signed approvals, got 1 valid signed approval",
    "same approver twice": "bea approved twice; each approval must come from a different person",
    "initiator approves": "olu uploaded or started this run and cannot approve it",
}


@pytest.mark.parametrize("case", [*REASONS, "two approvers"])
def test_resume_needs_valid_signed_approvals(
    prefect_harness, server: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    from prefect.flow_runs import resume_flow_run

    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PAYOPS_APPROVAL_KEY", KEY.decode())
    slug = case.replace(" ", "-")
    sheet = write_sheet(tmp_path / "s.xlsx", payroll_rows(3, prefix=f"SG{abs(hash(slug)) % 10_000}"))
    rule = sign_rule(KEY, source=str(sheet), initiator="olu", uploader="olu", rule=parse_tiers("10:1, 30:2"))
    params = PayoutRunParams(
        source=str(sheet), label=f"signed-{slug}", report_dir=str(tmp_path / "r"), approval_rule=rule
    )
    before = emulator_stats(server.base_url)["payouts"]

    async def scenario() -> dict:
        named = payout_spreadsheet.with_options(flow_run_name=f"signed-{slug}")
        task = asyncio.create_task(named(params, return_state=True))
        run_id = await _paused(f"signed-{slug}")
        answer = {"decision": "approve", "comment": "from the API", "approvals": _approvals(case, run_id)}
        await resume_flow_run(run_id, run_input=answer)
        return run_summary(await task)

    s = asyncio.run(scenario())
    if case == "two approvers":
        assert s["outcome"] == "completed" and s["approval"]["approvers"] == ["bea", "cat"]
        assert s["started_by"] == "olu"  # from the signed rule: `payops runs` shows who started it
        assert emulator_stats(server.base_url)["payouts"] == before + 3
    else:
        assert s["outcome"] == "not_approved" and emulator_stats(server.base_url)["payouts"] == before
        assert s["approval"] == {"approved": False, "comment": f"approval refused: {REASONS[case]}"}


def test_a_rule_signed_for_another_sheet_or_with_another_key_is_refused_before_pausing(
    prefect_harness, server: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PAYOPS_APPROVAL_KEY", KEY.decode())
    sheet = write_sheet(tmp_path / "s.xlsx", payroll_rows(3, prefix="SGR"))
    before = emulator_stats(server.base_url)["payouts"]
    for token, reason in [
        (
            sign_rule(KEY, source="/elsewhere.xlsx", initiator="o", uploader="o", rule=parse_tiers("0:0")),
            "another sheet",
        ),
        (
            sign_rule(b"k" * 20, source=str(sheet), initiator="o", uploader="o", rule=parse_tiers("0:0")),
            "not signed",
        ),
    ]:
        params = PayoutRunParams(
            source=str(sheet), label="rule", report_dir=str(tmp_path / "r"), approval_rule=token
        )
        s = run_summary(asyncio.run(payout_spreadsheet(params, return_state=True)))
        assert s["outcome"] == "not_approved" and reason in s["approval"]["comment"]
    assert emulator_stats(server.base_url)["payouts"] == before
