"""Reports: formula injection defused, resubmit references fresh and deterministic, files written."""

from __future__ import annotations

import json
import zipfile
from decimal import Decimal

from openpyxl import load_workbook
from payops.tasks.reports.run_reports import neutralise, resubmit_reference, write_reports
from payops.tasks.rows.outcome import RowOutcome


def test_cells_starting_with_formula_characters_are_neutralised() -> None:
    for risky in ['=HYPERLINK("x")', "+1+1", "-2+3", "@SUM(A1)", "\tx"]:
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

    from payops.tasks.rows.name_check import NameCheck
    from payops.tasks.rows.outcome import row_facts
    from payops.tasks.rows.payout_row import PayoutRow

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
    read = {
        "reference": "Payment Reference",
        "payee_name": "Full Name",
        "amount": "Amount",
        "destination": "Phone",
    }
    paths = write_reports(
        str(tmp_path),
        "run",
        columns,
        table,
        outcomes,
        summary,
        "Payment Reference",
        row_facts(rows, names),
        read,
    )
    sheet = load_workbook(paths["xlsx"])["results"]
    head = [c.value for c in sheet[1]]
    col = {h: i + 1 for i, h in enumerate(head)}
    amounts = [sheet.cell(r, col["Amount"]).value for r in (2, 3)]
    assert all(isinstance(a, float) for a in amounts)
    assert sheet.cell(2, col["Amount"]).number_format == "#,##0.00"
    assert sum(Decimal(str(a)) for a in amounts) == Decimal(summary["amount_total"])
    # The sheet's own amount column ("1,200.50" as typed) is echoed as the amount payops read: finance sums
    # either column and gets the total.
    echoed = [sheet.cell(r, col["Amount (sheet)"]).value for r in (2, 3)]
    assert all(isinstance(a, float) for a in echoed)
    assert sum(Decimal(str(a)) for a in echoed) == Decimal(summary["amount_total"])
    assert sheet.cell(2, col["Payment Reference"]).value == "P-1"
    assert sheet.cell(2, col["Fee"]).value == 12.01 and sheet.cell(3, col["Fee"]).number_format == "#,##0.00"
    assert sheet.cell(2, col["Completed at (UTC)"]).value == datetime(2026, 11, 22, 10, 0, 5, 123000)
    assert sheet.cell(2, col["Completed at (UTC)"]).is_date
    phone = sheet.cell(2, col["Phone"])
    assert phone.value == "+233 24 123 4567" and phone.data_type == "s" and phone.quotePrefix
    assert sheet.cell(3, col["Phone"]).value == "0244000002"  # leading zero kept: text
    assert sheet.cell(3, col["Holder name"]).value == "Yaw Darko"
    assert [sheet.cell(r, col["Name check"]).value for r in (2, 3)] == ["match", "mismatch"]

    pairs = dict(load_workbook(paths["xlsx"])["summary"].iter_rows(min_row=2, values_only=True))
    assert pairs["Approval: approved by bea"] == "2026-11-22T09:00: checked against HR"
    assert pairs["Approval: approved by kojo"] == "2026-11-22T09:05: budget line 4"
    assert json.loads(open(paths["json"]).read())["approval"]["decisions"] == decisions

    csv_lines = open(paths["csv"]).read().splitlines()
    assert csv_lines[1].endswith(",1200.50,GHS,12.01,Ama Mensah,match,,,,,,2026-11-22T10:00:05.123+00:00")
    assert csv_lines[1].startswith('P-1,Ama Mensah,"1,200.50",')  # the csv keeps the sheet's text
    assert ",+233 24 123 4567," in csv_lines[1]  # a phone number is not a formula: no guard apostrophe


def _payout_row(row: int, amount: str, destination: str) -> object:
    from decimal import Decimal

    from payops.tasks.rows.payout_row import PayoutRow

    return PayoutRow(
        row=row,
        reference=f"P-{row}",
        amount=Decimal(amount),
        currency="GHS",
        provider="mtn",
        destination_type="msisdn",
        destination=destination,
        payee_name="Ama Mensah",
    )


def test_a_failing_row_reads_in_words_beside_its_code_in_the_xlsx_and_the_csv(tmp_path) -> None:
    """People read what happened and what to do; the codes keep their own columns for machines."""
    import csv

    columns = ["name", "amount", "destination"]
    table = [
        {"__row__": str(r), "name": "Ama", "amount": "10.00", "destination": f"23324000000{r}"}
        for r in range(2, 7)
    ]
    outcomes = {
        2: RowOutcome(2, "run-r2", "run-b0000", "accepted", "failed", "0.50", "account_not_found"),
        3: RowOutcome(
            3,
            "run-r3",
            "run-b0000",
            "refused",
            error_code="daily_limit_exceeded",
            error_message="daily limit",
        ),
        4: RowOutcome(
            4, submission="invalid", error_code="invalid_input", error_message="amount: not a number"
        ),
        5: RowOutcome(5, "run-r5", "run-b0000", "accepted", "delivered", "0.50"),
        6: RowOutcome(
            6, "run-r6", "run-b0000", "accepted", "failed", "0.50", "wallet_frozen", retried_as="run-rt1"
        ),
    }
    summary = {"label": "run", "outcome": "completed", "errors": []}
    paths = write_reports(str(tmp_path), "run", columns, table, outcomes, summary, None)
    sheet = load_workbook(paths["xlsx"])["results"]
    head = [c.value for c in sheet[1]]
    by_row = {
        r[0].row: {h: c.value for h, c in zip(head, r, strict=True)} for r in sheet.iter_rows(min_row=2)
    }
    failed, refused, invalid, delivered, retried = (by_row[r] for r in range(2, 7))
    assert failed["Failure reason"] == "account_not_found"
    assert failed["What happened"] == "The number is not registered with the provider."
    assert failed["Next step"] == "Check the number with the payee, then retry the row."
    assert (
        refused["Error code"] == "daily_limit_exceeded"
        and refused["What happened"] == "Today's payout limit is reached."
    )
    assert invalid["What happened"] == "The row has a problem in the sheet, so payops did not send it."
    assert invalid["Error message"] == "amount: not a number"
    assert delivered["What happened"] is None and delivered["Next step"] is None
    assert retried["What happened"] == "The service gave the code wallet_frozen."
    assert "run-rt1" in retried["Next step"]

    with open(paths["csv"], newline="", encoding="utf-8") as fh:
        lines = list(csv.DictReader(fh))
    assert lines[0]["Failure reason"] == "account_not_found"
    assert (
        lines[0]["What happened"] == failed["What happened"] and lines[0]["Next step"] == failed["Next step"]
    )
    assert lines[1]["Next step"] == "Retry the row tomorrow, or ask the provider to raise the daily limit."


def test_the_sheets_own_columns_are_echoed_as_the_values_payops_read(tmp_path) -> None:
    """The amount payops read is a number in its own column; numbers stay numbers, identifiers and phone
    numbers stay text; the csv keeps the sheet's text, guarding only what a spreadsheet runs."""
    import csv
    from decimal import Decimal

    from payops.tasks.rows.outcome import row_facts

    columns = ["Employee ID", "Hours", "Bonus", "Phone", "Pay", "Note", "Account"]
    cells = [
        ["00123", "40", "-5.00", "+233 24 123 4567", "1,200.50", "12", "1234567890123"],
        ["00456", "37.5", "", "0244000002", "99.99", "n/a", "1234567890124"],
        ["00789", "", "12", "233244000003", "abc", "", "1234567890125"],
    ]
    table = [{"__row__": str(i), **dict(zip(columns, row, strict=True))} for i, row in enumerate(cells, 2)]
    facts = row_facts([_payout_row(2, "1200.50", "233241234567"), _payout_row(3, "99.99", "233244000002")])
    outcomes = {
        2: RowOutcome(2, "P-2", "run-b0000", "accepted", "delivered", "1.00"),
        3: RowOutcome(3, "P-3", "run-b0000", "accepted", "delivered", "1.00"),
        4: RowOutcome(4, submission="invalid", error_code="invalid_input", error_message="Pay: not a number"),
    }
    read = {"amount": "Pay", "destination": "Phone"}
    summary = {"label": "run", "outcome": "completed", "amount_total": "1300.49", "errors": []}
    paths = write_reports(str(tmp_path), "run", columns, table, outcomes, summary, None, facts, read)
    sheet = load_workbook(paths["xlsx"])["results"]
    col = {c.value: c.column for c in sheet[1]}

    def values(header: str) -> list[object]:
        return [sheet.cell(r, col[header]).value for r in (2, 3, 4)]

    pay = values("Pay")
    assert isinstance(pay[0], float) and isinstance(pay[1], float) and pay[2] == "abc"  # unread: its text
    numeric = [Decimal(str(v)) for v in pay if isinstance(v, int | float)]
    assert sum(numeric) == Decimal(summary["amount_total"])  # finance's SUM of the sheet's own column
    assert sheet.cell(2, col["Pay"]).number_format == "#,##0.00"
    assert values("Hours") == [40, 37.5, None] and sheet.cell(3, col["Hours"]).number_format == "General"
    assert values("Bonus") == [-5, None, 12]
    assert values("Employee ID") == ["00123", "00456", "00789"]  # leading zeros: text
    assert values("Phone") == ["+233 24 123 4567", "0244000002", "233244000003"]  # read as a phone: text
    assert values("Note") == ["12", "n/a", None]  # a column with words stays text
    assert values("Account") == ["1234567890123", "1234567890124", "1234567890125"]  # too long for a number
    assert all(sheet.cell(r, col[h]).data_type == "s" for r in (2, 3, 4) for h in ("Employee ID", "Phone"))

    with open(paths["csv"], newline="", encoding="utf-8") as fh:
        lines = list(csv.DictReader(fh))
    assert lines[0]["Pay"] == "1,200.50" and lines[0]["Employee ID"] == "00123"
    assert lines[0]["Bonus"] == "-5.00"  # a plain number: no guard apostrophe
    assert lines[0]["Phone"] == "+233 24 123 4567"  # a phone number, not a formula: no guard apostrophe


def test_plain_numbers_are_what_a_spreadsheet_holds_exactly() -> None:
    from payops.tasks.reports.run_reports import plain_number

    for text in ["0", "0.5", "40", "-5.00", "37.5", "12345678901", "123456789.123456"]:
        assert plain_number(text), text
    for text in [
        "00123",
        "01.5",
        "+5",
        "1,200.50",
        "1e5",
        "123456789012",
        "1234567890.1234567",
        " 5",
        "5 ",
        "",
    ]:
        assert not plain_number(text), text


def _paid_run(tmp_path, summary: dict) -> dict:
    """A payout run's reports: three rows paid (one failed), one the intake could not read."""
    from decimal import Decimal

    from payops.tasks.rows.outcome import row_facts

    columns = ["Staff", "Net Pay", "Phone"]
    cells = [
        ["Ama", "1,200.50", "0244000001"],
        ["Kofi", "99.99", "0244000002"],
        ["Esi", "10.01", "0244000003"],
    ]
    cells.append(["Yaw", "abc", "0244000004"])
    table = [{"__row__": str(i), **dict(zip(columns, row, strict=True))} for i, row in enumerate(cells, 2)]
    facts = row_facts([_payout_row(r, a, f"23324400000{r - 1}") for r, a in ((2, "1200.50"), (3, "99.99"))])
    facts |= row_facts([_payout_row(4, "10.01", "233244000003")])
    outcomes = {
        2: RowOutcome(2, "P-2", "run-b0000", "accepted", "delivered", "12.01"),
        3: RowOutcome(3, "P-3", "run-b0000", "accepted", "delivered", "1.00"),
        4: RowOutcome(4, "P-4", "run-b0000", "accepted", "failed", None, "account_not_found"),
        5: RowOutcome(
            5, submission="invalid", error_code="invalid_input", error_message="Net Pay: not a number"
        ),
    }
    read = {"amount": "Net Pay", "destination": "Phone", "payee_name": "Staff"}
    assert Decimal("1200.50") + Decimal("99.99") + Decimal("10.01") == Decimal(summary["amount_total"])
    return write_reports(str(tmp_path), "run", columns, table, outcomes, summary, None, facts, read)


SUMMARY = {
    "label": "payroll-2026-11",
    "source": "/srv/payroll/2026-11.xlsx",
    "outcome": "completed",
    "rows_total": 4,
    "rows_valid": 3,
    "rows_invalid": 1,
    "errors": [{"row": 5, "column": "Net Pay", "message": "not a number"}],
    "amount_total": "1310.50",
    "fee_total": "13.01",
    "currency": "GHS",
    "payouts_by_status": {"delivered": 2, "failed": 1},
    "refused_items": 0,
    "attention_total": 2,
    "rate_limit": {"limit_per_s": 50, "waited_s": 0.1, "throttled_429": 0},
    "api_calls": {"POST /v1/payouts/batch": 1, "GET /v1/payouts": 3},
    "reconciliation": {"status": "clean", "matched": 3},
}


def test_the_results_sheet_ends_with_a_labelled_totals_row(tmp_path) -> None:
    """Under the rows: their count, the sheet's amount column and payops' Amount summed as numbers (the typed
    amounts; the row payops could not read is not summed), the fees charged summed."""
    from decimal import Decimal

    paths = _paid_run(tmp_path, dict(SUMMARY))
    sheet = load_workbook(paths["xlsx"])["results"]
    head = [c.value for c in sheet[1]]
    assert sheet.max_row == 1 + 4 + 1
    total = {h: c for h, c in zip(head, sheet[sheet.max_row], strict=True)}
    assert total["Staff"].value == "Total: 4 rows"
    for column in ("Net Pay", "Amount"):
        assert Decimal(str(total[column].value)) == Decimal("1310.50"), column
        assert total[column].number_format == "#,##0.00"
    assert Decimal(str(total["Fee"].value)) == Decimal("13.01")  # the failed payout was charged nothing
    assert total["Payout status"].value is None and total["Phone"].value is None
    assert not open(paths["csv"]).read().count("Total:")  # the csv stays one line per row, for machines


def test_the_summary_sheet_is_a_short_page_of_labelled_figures_for_people(tmp_path) -> None:
    from datetime import datetime

    paths = _paid_run(tmp_path, dict(SUMMARY))
    sheet = load_workbook(paths["xlsx"])["summary"]
    rows = list(sheet.iter_rows(min_row=2))
    figures = {r[0].value: r[1] for r in rows}
    assert len(rows) <= 20
    assert not [k for k in figures if "." in k or "_" in k]  # no machine field (rate_limit.*, api_calls.*)
    assert figures["Run"].value == "payroll-2026-11" and figures["Source sheet"].value.endswith(
        "2026-11.xlsx"
    )
    assert figures["Outcome"].value == "Completed with failures"
    assert (figures["Rows valid"].value, figures["Rows invalid"].value) == (3, 1)
    assert (figures["Payouts delivered"].value, figures["Payouts failed"].value) == (2, 1)
    for label, amount in (("Amount in the sheet (GHS)", 1310.5), ("Fees (GHS)", 13.01)):
        assert figures[label].value == amount and figures[label].number_format == "#,##0.00", label
    assert figures["Reconciliation"].value == "clean"
    assert isinstance(figures["Report written (UTC)"].value, datetime)
    data = json.loads(open(paths["json"]).read())  # the machine fields stay in the JSON summary
    assert data["rate_limit"]["limit_per_s"] == 50 and data["api_calls"]["GET /v1/payouts"] == 3


def test_the_summary_sheet_shows_the_money_moved_per_currency_when_the_run_has_it(tmp_path) -> None:
    moved = {
        "GHS": {
            "paid": "1300.49",
            "paid_payouts": 2,
            "not_paid": "10.01",
            "not_paid_payouts": 1,
            "fees": "13.01",
            "wallet_effect": "-1313.50",
        }
    }
    paths = _paid_run(tmp_path, {**SUMMARY, "moved": moved})
    figures = {
        k: v for k, v in load_workbook(paths["xlsx"])["summary"].iter_rows(min_row=2, values_only=True)
    }
    assert figures["Paid (GHS)"] == 1300.49 and figures["Payouts paid (GHS)"] == 2
    assert figures["Not paid (GHS)"] == 10.01 and figures["Payouts not paid (GHS)"] == 1
    assert figures["Fees charged (GHS)"] == 13.01 and figures["Wallet movement (GHS)"] == -1313.5
    # the sheet's total (what was approved) stays beside what moved
    assert Decimal(str(figures["Amount in the sheet (GHS)"])) == Decimal(SUMMARY["amount_total"])
