"""The payout flow end to end against the emulator (real uvicorn on 127.0.0.1, Prefect's test server)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from openpyxl import load_workbook
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.sandbox import SandboxConfig, SandboxServer

from tests.flows.approval_support import decide_as, key_pair, run_paused
from tests.flows.support import HEADERS, emulator_stats, payroll_rows, write_sheet

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.6)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> SandboxServer:
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    key_pair()  # in the session's payops home, where the flows find its public half
    return server


def payout_count(server: SandboxServer) -> int:
    return emulator_stats(server.base_url)["payouts"]


def run(params: PayoutRunParams) -> dict:
    return run_summary(asyncio.run(payout_spreadsheet(params, return_state=True)))


def test_1050_rows_go_out_in_11_batches_and_all_reach_final(prefect_harness, env, tmp_path: Path) -> None:
    rows = payroll_rows(1050, prefix="B", specials={5: "0001", 6: "0002", 7: "0003"})
    sheet = write_sheet(tmp_path / "big.xlsx", rows)
    before = payout_count(env)
    s = run(
        PayoutRunParams(
            source=str(sheet), label="big-1050", report_dir=str(tmp_path / "reports"), poll_deadline_s=120
        )
    )
    assert s["outcome"] == "completed" and s["batches"] == 11 and s["rows_valid"] == 1050
    assert s["api_calls"]["POST /v1/payout-batches"] == 11
    assert payout_count(env) - before == 1050
    assert s["not_final"] == [] and sum(s["payouts_by_status"].values()) == 1050
    assert s["payouts_by_status"]["failed"] == 2 and s["payouts_by_status"]["delivered"] == 1048
    # Polling refreshed many payouts per call: never more list calls in a round than pages of 100.
    assert max(s["poll_calls_per_round"]) <= 11 + 5

    wb = load_workbook(s["report_files"]["xlsx"])
    res = list(wb["results"].iter_rows(values_only=True))
    head = res[0]
    col = {h: i for i, h in enumerate(head)}
    assert list(head[: len(HEADERS)]) == HEADERS
    first, failed, review = res[1], res[7], res[8]
    assert first[col["reference"]] == "B-00000" and first[col["Reference (sent)"]] == "B-00000"
    assert first[col["Batch"]] == "big-1050-b0000" and first[col["Submission"]] == "accepted"
    assert first[col["Payout status"]] == "delivered" and first[col["Fee"]] == 0.5
    assert isinstance(first[col["Completed at (UTC)"]], datetime)
    assert first[col["Amount"]] == 10.5 and first[col["Currency"]] == "GHS"
    assert failed[col["destination"]].endswith("0002") and failed[col["Payout status"]] == "failed"
    assert failed[col["Failure reason"]] == "account_not_found"
    assert review[col["Payout status"]] == "delivered"  # passed through in_review
    assert res[-2][col["Batch"]] == "big-1050-b0010"  # the last row before the totals row
    resubmit = list(wb["resubmit"].iter_rows(values_only=True))
    assert [r[0] for r in resubmit[1:]] == ["B-00005-rs1", "B-00006-rs1"]


def test_rerun_with_the_same_label_sends_nothing_new(prefect_harness, env, tmp_path: Path) -> None:
    sheet = write_sheet(tmp_path / "twice.xlsx", payroll_rows(120, prefix="TW", specials={3: "0001"}))
    params = PayoutRunParams(
        source=str(sheet), label="twice", report_dir=str(tmp_path / "reports"), poll_deadline_s=60
    )
    first = run(params)
    count = payout_count(env)
    second = run(params)
    assert payout_count(env) == count
    assert second["payouts_by_status"] == first["payouts_by_status"]
    assert second["replayed_payouts"] == 120 and first["replayed_payouts"] == 0


def test_default_label_replays_the_identical_sheet(prefect_harness, env, tmp_path: Path) -> None:
    rows = payroll_rows(30, prefix="DL")
    a = write_sheet(tmp_path / "a.xlsx", rows)
    b = write_sheet(tmp_path / "b.csv.xlsx", rows)  # another file, same content
    first = run(PayoutRunParams(source=str(a), report_dir=str(tmp_path / "reports"), poll_deadline_s=60))
    count = payout_count(env)
    second = run(PayoutRunParams(source=str(b), report_dir=str(tmp_path / "reports"), poll_deadline_s=60))
    assert first["label"] == second["label"] and payout_count(env) == count


def test_per_item_refusals_are_recorded_and_do_not_stop_the_rest(
    prefect_harness, env, tmp_path: Path
) -> None:
    rows = payroll_rows(5, prefix="PI")
    rows[2][2] = "150000.00"  # over the demo business's per-transaction limit of 100,000.00
    sheet = write_sheet(tmp_path / "refuse.xlsx", rows)
    s = run(
        PayoutRunParams(
            source=str(sheet),
            label="refusals",
            report_dir=str(tmp_path / "reports"),
            poll_deadline_s=60,
            allow_preflight_problems=True,
        )
    )
    assert s["outcome"] == "completed"
    assert s["refused_items"] == 1 and s["refused_by_code"] == {"transaction_limit_exceeded": 1}
    assert s["payouts_by_status"] == {"delivered": 4}
    assert any("per-transaction limit" in p for p in s["preflight"]["problems"])


def test_preflight_problem_refuses_without_sending(prefect_harness, env, tmp_path: Path) -> None:
    rows = payroll_rows(3, prefix="PF")
    rows[0][2] = "150000.00"
    before = payout_count(env)
    s = run(
        PayoutRunParams(
            source=str(write_sheet(tmp_path / "pf.xlsx", rows)),
            label="pf",
            report_dir=str(tmp_path / "reports"),
        )
    )
    assert s["outcome"] == "preflight_failed" and payout_count(env) == before


def test_in_review_and_held_at_the_deadline_are_awaiting_review(prefect_harness, env, tmp_path: Path) -> None:
    rows = payroll_rows(6, prefix="RV", specials={0: "0004", 1: "0007", 2: "0001"})
    sheet = write_sheet(tmp_path / "review.xlsx", rows)
    s = run(
        PayoutRunParams(
            source=str(sheet), label="review", report_dir=str(tmp_path / "reports"), poll_deadline_s=4
        )
    )
    assert s["outcome"] == "completed" and s["deadline_reached"] is True
    assert sorted(s["awaiting_review"]) == ["RV-00000", "RV-00001"]
    assert s["payouts_by_status"]["held"] == 1 and s["payouts_by_status"]["in_review"] == 1
    assert s["payouts_by_status"]["failed"] == 1 and s["payouts_by_status"]["delivered"] == 3


def test_invalid_sheet_is_refused_whole_and_nothing_is_sent(prefect_harness, env, tmp_path: Path) -> None:
    rows = payroll_rows(4, prefix="IV")
    rows[1][2] = "-5"
    rows[3][3] = "usd$"
    before = payout_count(env)
    s = run(
        PayoutRunParams(
            source=str(write_sheet(tmp_path / "bad.xlsx", rows)),
            label="bad",
            report_dir=str(tmp_path / "reports"),
        )
    )
    assert s["outcome"] == "invalid_input" and payout_count(env) == before
    assert {(e["row"], e["column"]) for e in s["errors"]} == {(3, "amount"), (5, "currency")}
    assert Path(s["report_files"]["validation"]).exists()


def test_skip_invalid_sends_the_valid_rows(prefect_harness, env, tmp_path: Path) -> None:
    rows = payroll_rows(4, prefix="SK")
    rows[1][2] = "12.345"
    s = run(
        PayoutRunParams(
            source=str(write_sheet(tmp_path / "skip.xlsx", rows)),
            label="skip",
            report_dir=str(tmp_path / "reports"),
            on_invalid_rows="skip",
            poll_deadline_s=60,
        )
    )
    assert s["outcome"] == "completed" and s["rows_invalid"] == 1
    assert s["payouts_by_status"] == {"delivered": 3}
    res = list(load_workbook(s["report_files"]["xlsx"])["results"].iter_rows(values_only=True))
    assert res[2][res[0].index("Submission")] == "invalid"


@pytest.mark.parametrize("approve", [False, True])
def test_approval_gates_sending(prefect_harness, env, tmp_path: Path, approve: bool) -> None:
    sheet = write_sheet(tmp_path / "approve.xlsx", payroll_rows(3, prefix=f"AP{int(approve)}"))
    before = payout_count(env)
    params = PayoutRunParams(
        source=str(sheet),
        label=f"approve-{approve}",
        report_dir=str(tmp_path / "reports"),
        require_approval=True,
        approval_timeout_s=60,
        poll_deadline_s=60,
    )

    async def decide(run_id: str, _description: str) -> None:
        assert payout_count(env) == before  # nothing is sent before approval
        await decide_as(run_id, "ann", approve=approve, comment="checked")

    flow = payout_spreadsheet.with_options(flow_run_name=params.label)
    _, _, state = run_paused(lambda: flow(params, return_state=True), params.label, decide)
    s = run_summary(state)
    approval = dict(s["approval"])
    [decision] = approval.pop("decisions")  # each approver's own decision and words, for the reports
    assert (decision["by"], decision["comment"]) == ("ann", "checked")
    if approve:
        assert s["outcome"] == "completed" and payout_count(env) == before + 3
        assert approval == {"approved": True, "comment": "ann: checked", "approvers": ["ann"]}
        assert decision["decision"] == "approved"
    else:
        assert s["outcome"] == "not_approved" and payout_count(env) == before
        assert approval == {"approved": False, "comment": "checked"} and decision["decision"] == "rejected"


def test_threshold_requires_approval_and_a_timeout_rejects(prefect_harness, env, tmp_path: Path) -> None:
    sheet = write_sheet(tmp_path / "threshold.xlsx", payroll_rows(2, prefix="TH"))
    before = payout_count(env)
    s = run(
        PayoutRunParams(
            source=str(sheet),
            label="threshold",
            report_dir=str(tmp_path / "reports"),
            approval_threshold=Decimal("20.00"),
            approval_timeout_s=10,
        )
    )
    assert s["outcome"] == "not_approved" and payout_count(env) == before
    assert s["approval"]["approved"] is False and "no approval within 10s" in s["approval"]["comment"]
