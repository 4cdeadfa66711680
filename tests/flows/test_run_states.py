"""Outcomes as states a person reads (flows/outcomes.py), the Resume dialog's context and explicit decision,
and the phase log lines: real payout runs against the emulator on Prefect's test server."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from payops.flows.outcomes import end_run, run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.flows.settlements import REPORT_HEADERS, TABLE_HEADERS, summary_markdown, table_rows
from payops.flows.summaries import PurchaseRunSummary, SettlementRunSummary, TransactionsReportSummary
from payops.sandbox import SandboxConfig, SandboxServer
from payops.store.settings import PayopsSettings
from payops.tasks.payouts.polling import progress_description
from payops.tasks.payouts.run_summary import Decision, PayoutRunSummary

from tests.flows.approval_support import decide_as, key_pair, run_paused
from tests.flows.support import emulator_stats, payroll_rows, write_sheet


@pytest.mark.parametrize(
    ("summary", "kind", "name"),
    [
        (PayoutRunSummary(outcome="completed", payouts_by_status={"delivered": 3}), "COMPLETED", "Completed"),
        (
            PayoutRunSummary(outcome="completed", payouts_by_status={"delivered": 2, "failed": 1}),
            "COMPLETED",
            "Completed with failures",
        ),
        (PurchaseRunSummary(outcome="completed", refused_items=1), "COMPLETED", "Completed with failures"),
        (PayoutRunSummary(outcome="dry_run"), "COMPLETED", "Dry run"),
        (
            PayoutRunSummary(outcome="not_approved", decision=Decision(kind="rejected", by="bea")),
            "CANCELLED",
            "Rejected",
        ),
        (PayoutRunSummary(outcome="not_approved"), "CANCELLED", "Not approved"),
        (PayoutRunSummary(outcome="invalid_input"), "CANCELLED", "Refused"),
        (PayoutRunSummary(outcome="preflight_failed"), "CANCELLED", "Refused"),
        (SettlementRunSummary(outcome="incomplete"), "COMPLETED", "Incomplete"),
        (SettlementRunSummary(outcome="policy_alert"), "FAILED", "Failed"),
        (
            SettlementRunSummary(outcome="completed", run_id="r1", settlement_outcome="failed_partial"),
            "COMPLETED",
            "Completed with failures",
        ),
    ],
)
def test_each_outcome_maps_to_one_state(summary, kind: str, name: str) -> None:
    state = end_run(summary)
    assert (state.type.value, state.name) == (kind, name)
    assert run_summary(state) is summary


def test_the_json_of_a_typed_summary_is_byte_for_byte_the_written_summary() -> None:
    """`--json` prints `as_json()`: the keys in the order the flow wrote them, the values as written."""
    written = {
        "label": None,
        "source": "pay.xlsx",
        "outcome": "completed",
        "rows_total": 3,
        "errors": [{"row": None, "column": None, "message": "x"}],
        "preflight": {"problems": [], "name_checks": Counter({"match": 2})},
        "refused_by_code": {None: 1},
        "fee_total": "1.50",
        "approval": {"approved": True, "comment": "", "approvers": ["bea"]},
        "api_calls": {"POST /v1/payouts": 1},
        "duration_s": 1.25,
        "attention_rows": [],
    }
    summary = PayoutRunSummary.model_validate(written)
    summary.decision = Decision(kind="rejected")  # never a JSON field
    assert json.dumps(summary.as_json(), default=str) == json.dumps(written, default=str)
    report = {"label": "tx", "outcome": "completed", "from": "a", "to": "b", "transactions": 2}
    assert json.dumps(TransactionsReportSummary.model_validate(report).as_json()) == json.dumps(report)


def test_the_settle_now_table_has_the_important_columns_first_and_at_most_8() -> None:
    row = [f"v{i}" for i in range(len(REPORT_HEADERS))]
    (cells,) = table_rows([row])
    assert list(cells)[:3] == ["run id", "outcome", "total"] and len(cells) <= 8 == len(TABLE_HEADERS)
    assert cells["total"] == row[REPORT_HEADERS.index("total")]


def test_the_progress_artifact_says_the_counts() -> None:
    assert progress_description("pay-1", 1200, 2000) == "1,200 of 2,000 payouts final (run pay-1)"
    assert progress_description("pay-1", 3, 4, 1) == "3 of 4 payouts final, 1 awaiting review (run pay-1)"


def test_a_settled_run_is_not_filed_under_failed_runs() -> None:
    row = ["r1", "ref", None, "completed", "settled", 3, "10.00", "GHS", "settle_now", "outcome settled"]
    summary = {"outcome": "completed", "run_id": "r1", "status": "completed", "settlement_outcome": "settled"}
    text = summary_markdown(
        "Settle now ref", {**summary, "total": "10.00", "runs_seen": 1}, [row + [None] * 6], PayopsSettings()
    )
    assert "Failed runs and retries" not in text and "| r1 | settled | 10.00 |" in text


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch) -> SandboxServer:
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    key_pair()  # in the session's payops home, where the flows find its public half
    monkeypatch.setenv("PAYOPS_CONSOLE_URL", "http://console.test")
    monkeypatch.setenv("PAYOPS_PREFECT_UI_URL", "http://prefect-ui.test")
    return server


@pytest.fixture
def run_log() -> Iterator[list[str]]:
    """The payout flow's run log lines (the Prefect run logger, INFO and above)."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("prefect.flow_runs")
    handler, level = Keep(logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(level)


def payouts_sent(server: SandboxServer) -> int:
    return emulator_stats(server.base_url)["payouts"]


def _pause_and_answer(
    params: PayoutRunParams, name: str, answer: dict, first: dict | None = None, rejecter=None
):
    """Run the flow until it pauses, resume it with ``answer``: (run id, dialog description, final state).
    A ``first`` answer is sent before and must be refused by Prefect (it does not fit the dialog's form); a
    ``rejecter`` rejects in the console instead (signed, stored, then the run resumed)."""
    from prefect.flow_runs import resume_flow_run

    async def then(run_id: str, _description: str) -> None:
        if first is not None:
            with pytest.raises(Exception, match="reject"):
                await resume_flow_run(run_id, run_input=first)
        if rejecter is not None:
            await decide_as(run_id, rejecter, approve=False, comment=answer["comment"])
        else:
            await resume_flow_run(run_id, run_input=answer)

    flow = payout_spreadsheet.with_options(flow_run_name=name)
    return run_paused(lambda: flow(params, return_state=True), name, then)


def approval_params(tmp_path: Path, label: str, rows: int, **fields) -> PayoutRunParams:
    """A sheet needing approval; its first row names a payee, so the pre-flight checks that name."""
    sheet_rows = payroll_rows(rows, prefix=label[-6:].upper())
    sheet_rows[0][1] = "Zed Nobody"
    sheet = write_sheet(tmp_path / f"{label}.xlsx", sheet_rows)
    return PayoutRunParams(
        source=str(sheet), label=label, report_dir=str(tmp_path / "r"), require_approval=True, **fields
    )


@pytest.mark.e2e
def test_a_rejection_ends_cancelled_rejected_with_the_comment_and_the_dialog_shows_the_totals(
    prefect_harness, env: SandboxServer, tmp_path: Path, run_log: list[str]
) -> None:
    params = approval_params(tmp_path, "states-reject", 3)
    before = payouts_sent(env)
    run_id, description, state = _pause_and_answer(
        params, "states-reject", {"comment": "wrong month"}, rejecter="bea"
    )
    assert (state.type.value, state.name) == ("CANCELLED", "Rejected")
    assert state.message == "states-reject: rejected by bea: wrong month; nothing sent"
    assert run_summary(state).outcome == "not_approved" and payouts_sent(env) == before
    # the dialog: rows, totals, fees, balance, name checks, the pre-flight link, where approvals happen
    assert "**3 payouts**" in description and "| GHS | 3 | GHS 34.50 | GHS " in description
    assert "total with fees" in description and "balance after" in description
    assert re.search(r"Payee names: (1 mismatch|\d+ mismatches)\.", description)
    assert "This dialog can only **reject**" in description
    assert f"http://prefect-ui.test/runs/flow-run/{run_id}?tab=Artifacts" in description
    assert f"http://console.test/runs/{run_id}" in description and "payops approve" in description
    # the phase log lines: sheet read, pre-flight, approval requested and decided (who and the comment)
    assert "sheet read: 3 rows (3 valid, 0 invalid)" in run_log
    assert any(line.startswith("pre-flight: total 34.50, fees ") for line in run_log)
    assert any(line.startswith("approval requested: states-reject needs 1 approval(s)") for line in run_log)
    assert "approval decided: rejected by bea: wrong month; nothing sent" in run_log
    # the artifacts say what was decided: the pre-flight's last line, the summary's why
    from prefect.artifacts import Artifact

    preflight = Artifact.get("states-reject-preflight")
    assert preflight.data.endswith("**Rejected** by bea: wrong month; nothing sent.")
    assert "Approval required" not in preflight.data
    summary = Artifact.get("states-reject-summary")
    assert "**Why:** states-reject: rejected by bea: wrong month; nothing sent" in summary.data


@pytest.mark.e2e
def test_the_dialog_can_only_reject_and_refuses_an_answer_that_does_not_fit_its_form(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    params = approval_params(tmp_path, "states-dialog", 2)
    first = {"reject": "maybe"}  # not a yes/no: Prefect refuses it against the form's schema
    _, _, state = _pause_and_answer(params, "states-dialog", {"comment": "from the dialog"}, first=first)
    assert state.name == "Rejected"
    assert state.message == "states-dialog: rejected: from the dialog; nothing sent"


@pytest.mark.e2e
def test_refused_dry_run_and_failures_each_end_in_their_state(
    prefect_harness, env: SandboxServer, tmp_path: Path, run_log: list[str]
) -> None:
    bad = write_sheet(
        tmp_path / "bad.xlsx",
        [*payroll_rows(1, prefix="BD"), ["BD-x", "", "-1", "GHS", "mtn", "msisdn", "233240000009", ""]],
    )
    refused = asyncio.run(
        payout_spreadsheet(
            PayoutRunParams(source=str(bad), label="states-bad", report_dir=str(tmp_path / "r")),
            return_state=True,
        )
    )
    assert (refused.type.value, refused.name) == ("CANCELLED", "Refused")
    assert refused.message.startswith("states-bad: sheet refused (1 invalid row); first: row ")

    good = write_sheet(tmp_path / "good.xlsx", payroll_rows(3, prefix="ST", specials={1: "0002"}))
    dry = asyncio.run(
        payout_spreadsheet(
            PayoutRunParams(
                source=str(good), label="states-dry", report_dir=str(tmp_path / "r"), dry_run=True
            ),
            return_state=True,
        )
    )
    assert (dry.type.value, dry.name) == ("COMPLETED", "Dry run")

    paid = asyncio.run(
        payout_spreadsheet(
            PayoutRunParams(
                source=str(good), label="states-paid", report_dir=str(tmp_path / "r"), poll_deadline_s=60
            ),
            return_state=True,
        )
    )
    assert (paid.type.value, paid.name) == ("COMPLETED", "Completed with failures")
    assert run_summary(paid).payouts_by_status == {"delivered": 2, "failed": 1}
    assert any(
        line.startswith("batch 1/1 sent: 3 payouts, 3 accepted (0 replayed), 0 refused") for line in run_log
    )
    assert any(line.startswith("polling done after ") and "delivered 2, failed 1" in line for line in run_log)
    assert any(line.startswith("reports written for states-paid: xlsx ") for line in run_log)


@pytest.mark.e2e
def test_no_answer_in_time_ends_cancelled_not_approved(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    params = approval_params(tmp_path, "states-timeout", 2, approval_timeout_s=10)
    before = payouts_sent(env)
    state = asyncio.run(payout_spreadsheet(params, return_state=True))
    assert (state.type.value, state.name) == ("CANCELLED", "Not approved")
    assert state.message == "states-timeout: not approved: no approval within 10s; nothing sent"
    assert payouts_sent(env) == before


@pytest.mark.e2e
def test_without_a_verify_key_a_run_needing_approval_ends_not_approved_without_pausing(
    prefect_harness, env: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Approvals are always signed (issue 17): with no verify key, no approval could ever be accepted, so
    the run does not pause for an answer that could never pay; it says which setting and file are missing."""
    missing = tmp_path / "no-such-verify-key.pem"
    monkeypatch.setenv("PAYOPS_APPROVAL_VERIFY_KEY_FILE", str(missing))
    params = approval_params(tmp_path, "states-keyless", 2)
    before = payouts_sent(env)
    state = asyncio.run(payout_spreadsheet(params, return_state=True))
    assert (state.type.value, state.name) == ("CANCELLED", "Not approved")
    assert f"no approval verify key: {missing} does not exist" in state.message
    assert "PAYOPS_APPROVAL_VERIFY_KEY" in state.message
    # and what the person who started it sets up (issue 46: a CLI-only home's first run)
    assert "Start `payops serve` for this home (or set PAYOPS_URL" in state.message
    assert run_summary(state).outcome == "not_approved" and payouts_sent(env) == before


@pytest.mark.parametrize(
    ("state_type", "name", "tone"),
    [
        ("COMPLETED", "Completed", "ok"),
        ("COMPLETED", "Completed with failures", "warning"),
        ("COMPLETED", "Incomplete", "warning"),
        ("COMPLETED", "Dry run", "neutral"),
        ("CANCELLED", "Rejected", "warning"),
        ("CANCELLED", "Not approved", "warning"),
        ("CANCELLED", "Refused", "bad"),
        ("CANCELLED", "Cancelled", "neutral"),
        ("FAILED", "Failed", "bad"),
        ("CRASHED", "Crashed", "bad"),
        ("PAUSED", "Suspended", "waiting"),
        ("RUNNING", "Running", "neutral"),
    ],
)
def test_a_state_is_green_only_when_nothing_went_wrong(state_type: str, name: str, tone: str) -> None:
    from payops.flows.outcomes import state_tone

    assert state_tone(state_type, name) == tone
