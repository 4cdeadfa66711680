"""A retry reads its sheet with the currency its run read the original with (issue 46): rows recorded while
the run polls keep it (store.retries), rows taken from a finished run's report get it from its summary."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from payops.store import migrate, open_engine
from payops.store.retries import RetryRows
from payops.tasks.intake import IntakeError, IntakeOptions, read_payout_sheet
from payops.tasks.payouts.retry_rows import retry_rows_of
from payops.tasks.payouts.retry_sheet import prepare_retry
from payops.tasks.payouts.sheet_check import intake_summary
from payops.tasks.reports.run_reports import write_reports
from payops.tasks.rows.outcome import RowOutcome

HEADER = ["Employee ID", "Full Name", "Phone Number", "Net Pay", "Bank/Network", "Payment Reference"]


def test_a_retry_of_a_sheet_without_a_currency_column_reads_it_in_the_chosen_currency(tmp_path: Path) -> None:
    source = tmp_path / "payroll.csv"
    with source.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(
            [HEADER]
            + [
                [f"E-{i}", f"Staff {i}", f"+233 24 123 45{i:02d}", f"{100 + i}.25", "MTN", f"PR-{i}"]
                for i in range(4)
            ]
        )
    options = IntakeOptions(default_currency="GHS")
    first = read_payout_sheet(str(source), options)
    assert first.errors == [] and first.currency == "GHS" and first.currency_header is None
    outcomes = {
        r.row: RowOutcome(r.row, reference=r.reference, submission="accepted", status=status)
        for r, status in zip(first.rows, ["delivered", "failed", "delivered", "delivered"], strict=True)
    }
    outcomes[first.rows[3].row] = RowOutcome(first.rows[3].row, reference="PR-3", submission="refused")
    summary = intake_summary(str(source), "payroll", first)
    assert summary["currency"] == "GHS"
    write_reports(
        str(tmp_path), "payroll", first.columns, first.table, outcomes, summary.as_json(), "Payment Reference"
    )
    engine = open_engine(f"sqlite:///{tmp_path / 'payops.sqlite3'}")
    migrate(engine)
    try:
        store = RetryRows(engine)
        failed = {first.rows[1].row: outcomes[first.rows[1].row]}  # recorded as the run polls
        store.record(
            "payroll", retry_rows_of(first.columns, first.table, failed, "Payment Reference", "", "GHS")
        )
        retry = prepare_retry(str(tmp_path), "payroll", store)  # and the refused row, from the report
        assert (retry.label, retry.rows, retry.currency) == ("payroll-retry1", 2, "GHS")
        with pytest.raises(IntakeError, match="missing required column"):
            read_payout_sheet(retry.source)  # without its currency the retry sheet cannot be read
        read = read_payout_sheet(retry.source, IntakeOptions(default_currency=retry.currency))
        assert read.errors == [] and [(r.payee_name, r.currency) for r in read.rows] == [
            ("Staff 1", "GHS"),
            ("Staff 3", "GHS"),
        ]
    finally:
        engine.dispose()
