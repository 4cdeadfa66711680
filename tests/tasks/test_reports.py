"""Reports: formula injection defused, resubmit references fresh and deterministic, files written."""

from __future__ import annotations

import json
import zipfile

from openpyxl import load_workbook

from tasks.reports import RowOutcome, neutralise, resubmit_reference, write_reports


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
    assert results[1][0] == "'=cmd" and results[1][6] == "failed" and results[1][8] == "account_not_found"
    assert results[3][5] == "invalid"
    resubmit = list(wb["resubmit"].iter_rows(values_only=True))
    assert resubmit[0] == ("reference", "name", "amount", "destination")
    # Read back by payops (tasks.xlsx.READ_BACK_RULE): the sheet's own text, no guard, as an inline string
    # that no spreadsheet evaluates (no <f> element, t="inlineStr").
    assert resubmit[1:] == [("run-r2-rs1", "=cmd", "10.00", "233240000001")]
    with zipfile.ZipFile(paths["xlsx"]) as z:
        part = z.read("xl/worksheets/sheet3.xml").decode()
    assert "<f>" not in part and '<c r="B2" t="inlineStr"><is><t>=cmd</t></is></c>' in part
    data = json.loads(open(paths["json"]).read())
    assert data["report_files"]["csv"].endswith("run.csv")
    assert open(paths["csv"]).read().splitlines()[1].startswith("'=cmd,10.00")


def test_a_report_never_overwrites_the_sheet_being_paid(tmp_path) -> None:
    import pytest

    from tasks.reports import ReportWouldOverwriteSource, ensure_reports_spare_source

    sheet = tmp_path / "payroll.xlsx"
    with pytest.raises(ReportWouldOverwriteSource, match="would overwrite the sheet"):
        ensure_reports_spare_source(str(tmp_path), "payroll", str(sheet))
    ensure_reports_spare_source(str(tmp_path / "reports"), "payroll", str(sheet))
    ensure_reports_spare_source(str(tmp_path), "payroll-2026-11", str(sheet))


def test_column_headers_are_neutralised_in_csv_and_xlsx_reports(tmp_path) -> None:
    from tasks.tabular_reports import write_table_reports

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
