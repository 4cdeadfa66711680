"""Typed run summaries: the exit code of each outcome and the lines a person reads."""

from __future__ import annotations

import pytest
from payops.flows.summaries import (
    EventsCatchUpSummary,
    FollowupSummary,
    PurchaseRunSummary,
    ReconciliationSummary,
    SettlementRunSummary,
    TransactionsReportSummary,
)
from payops.tasks.ledger.transactions_report import GROUPS
from payops.tasks.payouts.run_summary import PayoutRunSummary


@pytest.mark.parametrize(
    ("outcome", "code"),
    [("completed", 0), ("dry_run", 0), ("invalid_input", 2), ("preflight_failed", 2), ("not_approved", 3)],
)
def test_payout_outcomes_map_to_exit_codes(outcome: str, code: int) -> None:
    assert PayoutRunSummary(outcome=outcome).exit_code == code
    assert PurchaseRunSummary(outcome=outcome).exit_code == code


@pytest.mark.parametrize(("outcome", "code"), [("completed", 0), ("incomplete", 1), ("policy_alert", 1)])
def test_a_settlement_run_that_did_not_complete_exits_1(outcome: str, code: int) -> None:
    assert SettlementRunSummary(outcome=outcome).exit_code == code


def test_payout_lines_name_the_file_level_error_and_the_reports() -> None:
    summary = PayoutRunSummary.model_validate(
        {
            "label": None,
            "source": "pay.xlsx",
            "outcome": "invalid_input",
            "errors": [{"row": None, "column": None, "message": "the file is empty"}],
            "duration_s": 0,
            "report_files": {"validation": "reports/x.xlsx"},
            "phase_durations_s": {"read_validate": 0.01},
        }
    )
    assert summary.lines() == [
        "run pay.xlsx: invalid_input",
        "  rows: 0 (0 valid, 0 invalid)   batches: 0",
        "  amount: 0.00   fees: 0.00   time: 0s",
        "  file: the file is empty",
        "  report validation: reports/x.xlsx",
    ]
    assert summary.as_json()["phase_durations_s"] == {"read_validate": 0.01}


def test_a_payout_summary_field_nobody_declared_is_refused() -> None:
    """Every field of the payout summary is typed (docs/runs.md): a key it does not know is a mistake."""
    with pytest.raises(ValueError, match="attention_row"):
        PayoutRunSummary.model_validate({"label": "x", "attention_row": []})
    with pytest.raises(ValueError, match="rows"):
        PayoutRunSummary.model_validate({"label": "x", "preflight": {"rows": 3}})


def test_other_families_read_their_fields() -> None:
    settle = SettlementRunSummary.model_validate(
        {
            "label": "settle-now",
            "outcome": "incomplete",
            "run_id": "r1",
            "settlement_outcome": None,
            "status": "running",
            "total": "1.00",
            "currency": "GHS",
        }
    )
    assert settle.lines()[1:] == [
        "  run r1: running   total 1.00 GHS",
        "  some runs were still running at the poll deadline: run the command again to report them",
    ]
    report = TransactionsReportSummary.model_validate(
        {"label": "tx", "outcome": "completed", "from": "a", "to": "b", "transactions": 2, "notes": ["n"]}
    )
    assert report.lines() == ["tx: completed", "  window a -> b: 2 transactions", "  note: n"]
    events = EventsCatchUpSummary.model_validate({"outcome": "completed", "restarted_without_cursor": True})
    assert events.lines()[0] == "events catch-up: completed" and events.exit_code == 0


# Every family's fields are typed (docs/runs.md, *Other flows' summaries*): a key its model does not declare,
# at the top or in a nested part, is a mistake and is refused.


def test_a_purchase_summary_field_nobody_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="purchases_by_state"):
        PurchaseRunSummary.model_validate({"label": "airtime", "purchases_by_state": {}})
    with pytest.raises(ValueError, match="col"):
        PurchaseRunSummary.model_validate(
            {"label": "airtime", "errors": [{"row": 2, "col": "x", "message": "m"}]}
        )


def test_a_settlement_summary_field_nobody_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="retried_now"):
        SettlementRunSummary.model_validate({"label": "settle-now-x", "retried_now": 1})
    with pytest.raises(ValueError, match="hint"):
        SettlementRunSummary.model_validate({"label": "x", "alert": {"code": "c", "fix": "f", "hint": "h"}})


def test_a_transactions_report_field_nobody_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="by_provider"):
        TransactionsReportSummary.model_validate({"label": "tx", "by_provider": {}})
    with pytest.raises(ValueError, match="sum"):
        TransactionsReportSummary.model_validate(
            {"label": "tx", "by_kind": {"payout": {"count": 1, "sum": {}}}}
        )
    assert {f"by_{group}" for group in GROUPS} <= set(TransactionsReportSummary.model_fields)


def test_an_events_catch_up_field_nobody_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="events_lost"):
        EventsCatchUpSummary.model_validate({"outcome": "completed", "events_lost": 0})


def test_a_followup_summary_field_nobody_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="moved_payouts"):
        FollowupSummary.model_validate({"label": "march", "moved_payouts": 1})


def test_a_reconciliation_summary_field_nobody_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="differences_found"):
        ReconciliationSummary.model_validate({"label": "r", "scope": "run", "differences_found": 1})
    with pytest.raises(ValueError, match="kind"):
        ReconciliationSummary.model_validate({"label": "r", "differences_list": [{"detail": "no kind"}]})


def test_a_summary_built_phase_by_phase_prints_its_json_in_the_declared_order() -> None:
    """A summary made with some fields and given the rest later prints them in its family's order."""
    summary = SettlementRunSummary(label="settle-now-x", reference="x", outcome="completed")
    summary.report_files = {"json": "x.json"}
    summary.duration_s = 1.5
    summary.run_id = "r1"
    assert list(summary.as_json()) == [
        "label",
        "reference",
        "outcome",
        "run_id",
        "duration_s",
        "report_files",
    ]
    assert SettlementRunSummary.model_validate(summary.as_json()).as_json() == summary.as_json()
