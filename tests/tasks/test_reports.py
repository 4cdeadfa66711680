"""Reports: formula injection defused, resubmit references fresh and deterministic, files written."""

from __future__ import annotations

import json
import zipfile

from openpyxl import load_workbook
from payops.tasks.reports.run_reports import RowOutcome, neutralise, resubmit_reference, write_reports


def test_cells_starting_with_formula_characters_are_neutralised() -> None:
    for risky in ['=HYPERLINK("x")', "+1", "-2+3", "@SUM(A1)", "\tx"]:
        assert neutralise(risky) == "'" + risky
    assert neutralise("Ama") == "Ama" and neutralise(5) == 5


def test_resubmit_reference_is_fresh_deterministic_and_valid() -> None:
    assert resubmit_reference("EMP-1") == "EMP-1-rs1"
    assert resubmit_reference("EMP-1-rs1") == "EMP-1-rs2"
    long = "a" * 64
    assert len(resubmit_reference(long)) == 64 and resubmit_reference(long).endswith("-rs1")


def test_write_reports_results_summary_resubmit(tmp_path) -> None:
    columns = ["name", "amount", "destination"]
    table = [
        {"__row__": "2", "name": "=cmd", "amount": "10.00", "destination": "233240000001"},
        {"__row__": "3", "name": "Kofi", "amount": "20.00", "destination": "233240000009"},
        {"__row__": "4", "name": "Esi", "amount": "x", "destination": "1"},
    ]
    outcomes = {
        2: RowOutcome(2, "run-r2", "run-b0000", "accepted", "failed", "0.50", "account_not_found"),
        3: RowOutcome(
            3, "run-r3", "run-b0000", "accepted", "delivered", "0.50", completed_at="2026-11-22T10:00"
        ),
        4: RowOutcome(
            4, submission="invalid", error_code="invalid_input", error_message="amount: not a number"
        ),
    }
    summary = {"label": "run", "outcome": "completed", "rows_total": 3, "errors": []}
    paths = write_reports(str(tmp_path), "run", columns, table, outcomes, summary, reference_column=None)
    wb = load_workbook(paths["xlsx"])
    assert wb.sheetnames == ["results", "summary", "resubmit"]
    results = list(wb["results"].iter_rows(values_only=True))
    assert results[0][:4] == ("name", "amount", "destination", "Reference (sent)")
    assert results[1][0] == "'=cmd" and results[1][6] == "failed" and results[1][12] == "account_not_found"
    assert results[3][5] == "invalid"
    resubmit = list(wb["resubmit"].iter_rows(values_only=True))
    assert resubmit[0] == ("reference", "name", "amount", "destination")
    # Read back by payops (tasks.reports.xlsx.READ_BACK_RULE): the sheet's own text, no guard, as an inline
    # string that no spreadsheet evaluates (no <f> element, t="inlineStr").
    assert resubmit[1:] == [("run-r2-rs1", "=cmd", "10.00", "233240000001")]
    with zipfile.ZipFile(paths["xlsx"]) as z:
        part = z.read("xl/worksheets/sheet3.xml").decode()
    assert "<f>" not in part and '<c r="B2" t="inlineStr"><is><t>=cmd</t></is></c>' in part
    data = json.loads(open(paths["json"]).read())
    assert data["report_files"]["csv"].endswith("run.csv")
    assert open(paths["csv"]).read().splitlines()[1].startswith("'=cmd,10.00")


def test_a_report_never_overwrites_the_sheet_being_paid(tmp_path) -> None:
    import pytest
    from payops.tasks.reports.run_reports import ReportWouldOverwriteSource, ensure_reports_spare_source

    sheet = tmp_path / "payroll.xlsx"
    with pytest.raises(ReportWouldOverwriteSource, match="would overwrite the sheet"):
        ensure_reports_spare_source(str(tmp_path), "payroll", str(sheet))
    ensure_reports_spare_source(str(tmp_path / "reports"), "payroll", str(sheet))
    ensure_reports_spare_source(str(tmp_path), "payroll-2026-11", str(sheet))


def test_column_headers_are_neutralised_in_csv_and_xlsx_reports(tmp_path) -> None:
    from payops.tasks.reports.tabular_reports import write_table_reports

    evil = '=HYPERLINK("http://evil.example/h","hdr")'
    table = [{"__row__": "2", evil: "x", "amount": "10.00"}]
    outcomes = {2: RowOutcome(2, "run-r2", "run-b0000", "accepted", "delivered", "0.50")}
    summary = {"label": "run", "outcome": "completed", "rows_total": 1, "errors": []}
    paths = write_reports(str(tmp_path / "p"), "run", [evil, "amount"], table, outcomes, summary, None)
    first = open(paths["csv"], encoding="utf-8").read().splitlines()[0]
    assert first.startswith('"\'=HYPERLINK(""http://evil.example/h"",""hdr"")",amount,')
    assert load_workbook(paths["xlsx"])["results"]["A1"].value == "'" + evil

    paths = write_table_reports(str(tmp_path / "t"), "tab", [evil, "+cmd"], [["a", "b"]], {"label": "tab"})
    lines = open(paths["csv"], encoding="utf-8").read().splitlines()
    assert lines[0] == '"\'=HYPERLINK(""http://evil.example/h"",""hdr"")",\'+cmd'
    assert [c.value for c in load_workbook(paths["xlsx"])["results"][1]] == ["'" + evil, "'+cmd"]


def test_finance_columns_amounts_numbers_sum_to_the_total_and_approvers_kept(tmp_path) -> None:
    """The xlsx a finance team opens: amounts and fees are numbers (SUM works), times are date-times in UTC,
    a '+233 24 ...' number is text without an apostrophe, holder names and verdicts are there, each approver's
    comment is in the summary; the csv keeps the plain wire text."""
    from datetime import datetime
    from decimal import Decimal

    from payops.tasks.intake import PayoutRow
    from payops.tasks.payouts.preflight import NameCheck
    from payops.tasks.reports.run_reports import row_facts

    columns = ["Payment Reference", "Full Name", "Amount", "Phone"]
    table = [
        {
            "__row__": "2",
            "Payment Reference": "P-1",
            "Full Name": "Ama Mensah",
            "Amount": "1,200.50",
            "Phone": "+233 24 123 4567",
        },
        {
            "__row__": "3",
            "Payment Reference": "P-2",
            "Full Name": "Kofi Boateng",
            "Amount": "99.99",
            "Phone": "0244000002",
        },
    ]
    rows = [
        PayoutRow(
            row=2,
            reference="P-1",
            amount=Decimal("1200.50"),
            currency="GHS",
            provider="mtn",
            destination_type="msisdn",
            destination="233241234567",
            payee_name="Ama Mensah",
        ),
        PayoutRow(
            row=3,
            reference="P-2",
            amount=Decimal("99.99"),
            currency="GHS",
            provider="mtn",
            destination_type="msisdn",
            destination="233244000002",
            payee_name="Kofi Boateng",
        ),
    ]
    names = [
        NameCheck(2, "233241234567", "Ama Mensah", "Ama Mensah", "match"),
        NameCheck(3, "233244000002", "Kofi Boateng", "Yaw Darko", "mismatch"),
    ]
    outcomes = {
        2: RowOutcome(
            2,
            "P-1",
            "run-b0000",
            "accepted",
            "delivered",
            "12.01",
            completed_at="2026-11-22T10:00:05.123+00:00",
        ),
        3: RowOutcome(3, "P-2", "run-b0000", "accepted", "failed", "1.00", "account_not_found"),
    }
    decisions = [
        {
            "by": "bea",
            "decision": "approved",
            "comment": "checked against HR",
            "at": "2026-11-22T09:00",
        },
        {"by": "kojo", "decision": "approved", "comment": "budget line 4", "at": "2026-11-22T09:05"},
    ]
    summary = {
        "label": "run",
        "outcome": "completed",
        "amount_total": "1300.49",
        "errors": [],
        "approval": {
            "approved": True,
            "comment": "approved by bea, kojo: budget line 4",
            "approvers": ["bea", "kojo"],
            "decisions": decisions,
        },
    }
    paths = write_reports(
        str(tmp_path), "run", columns, table, outcomes, summary, "Payment Reference", row_facts(rows, names)
    )
    sheet = load_workbook(paths["xlsx"])["results"]
    head = [c.value for c in sheet[1]]
    col = {h: i + 1 for i, h in enumerate(head)}
    amounts = [sheet.cell(r, col["Amount"]).value for r in (2, 3)]
    assert all(isinstance(a, float) for a in amounts)
    assert sheet.cell(2, col["Amount"]).number_format == "#,##0.00"
    assert sum(Decimal(str(a)) for a in amounts) == Decimal(summary["amount_total"])
    assert sheet.cell(2, col["Fee"]).value == 12.01 and sheet.cell(3, col["Fee"]).number_format == "#,##0.00"
    assert sheet.cell(2, col["Completed at (UTC)"]).value == datetime(2026, 11, 22, 10, 0, 5, 123000)
    assert sheet.cell(2, col["Completed at (UTC)"]).is_date
    phone = sheet.cell(2, col["Phone"])
    assert phone.value == "+233 24 123 4567" and phone.data_type == "s" and phone.quotePrefix
    assert sheet.cell(3, col["Phone"]).value == "0244000002"  # leading zero kept: text
    assert sheet.cell(3, col["Holder name"]).value == "Yaw Darko"
    assert [sheet.cell(r, col["Name check"]).value for r in (2, 3)] == ["match", "mismatch"]

    pairs = dict(load_workbook(paths["xlsx"])["summary"].iter_rows(min_row=2, values_only=True))
    assert pairs["approval.approved by bea"] == "2026-11-22T09:00: checked against HR"
    assert pairs["approval.approved by kojo"] == "2026-11-22T09:05: budget line 4"
    assert json.loads(open(paths["json"]).read())["approval"]["decisions"] == decisions

    csv_lines = open(paths["csv"]).read().splitlines()
    assert csv_lines[1].endswith(",1200.50,GHS,12.01,Ama Mensah,match,,,,2026-11-22T10:00:05.123+00:00")
    assert "'+233 24 123 4567" in csv_lines[1]  # csv stays plain text, neutralised as before
