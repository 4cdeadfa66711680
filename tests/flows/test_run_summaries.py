"""Typed run summaries: the exit code of each outcome and the lines a person reads."""

from __future__ import annotations

import pytest
from payops.flows.summaries import (
    EventsCatchUpSummary,
    PurchaseRunSummary,
    SettlementRunSummary,
    TransactionsReportSummary,
)
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
