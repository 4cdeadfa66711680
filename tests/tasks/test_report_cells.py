"""Report cells: money stays a number in a csv report (finance sums it), text that a spreadsheet could run
as a formula is still guarded."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pytest
from openpyxl import load_workbook
from payops.tasks.reports.table_workbook import table_workbook
from payops.tasks.reports.xlsx import formula_like, safe_cell, write_csv


def test_a_csv_report_keeps_money_a_number_and_guards_formula_text(tmp_path: Path) -> None:
    path = tmp_path / "report.csv"
    rows = [
        [Decimal("-29.48"), "-2+3+cmd|' /C calc'!A0"],
        [Decimal("1500.00"), '=HYPERLINK("http://x.example","pay")'],
    ]
    write_csv(str(path), ["amount", "note"], rows)
    with path.open(newline="", encoding="utf-8") as fh:
        read = list(csv.reader(fh))
    assert read[1] == ["-29.48", "'-2+3+cmd|' /C calc'!A0"]
    assert read[2] == ["1500.00", '\'=HYPERLINK("http://x.example","pay")']


def test_a_decimal_cell_is_a_number_and_text_is_guarded() -> None:
    assert safe_cell(Decimal("-1.50")) == Decimal("-1.50")
    assert safe_cell("-1.50") == "-1.50"  # a plain negative number is not a formula
    assert safe_cell("@SUM(A1)") == "'@SUM(A1)"


GUARDED = ['=HYPERLINK("http://x.example","pay")', "@SUM(A1)", "+cmd|' /C calc'!A0", "-2+3", "\tx", "\rx"]
"""What a spreadsheet takes for a formula ("-2+3" is one in Excel): guarded with an apostrophe."""
NOT_GUARDED = ["+233 24 123 4567", "+233241234567", "-12.50", "+(233) 24-123.45", "Ama", "0244000001"]
"""Numbers and phone numbers (a sign, then digits, spaces, dashes, dots, parentheses) and plain text."""


@pytest.mark.parametrize("text", GUARDED)
def test_a_formula_is_guarded_in_csv_and_xlsx_alike(tmp_path: Path, text: str) -> None:
    assert formula_like(text)
    in_csv, in_xlsx = _csv_and_xlsx_cell(tmp_path, text)
    assert in_csv == "'" + text
    assert in_xlsx == "'" + text.replace("\r", "\n")  # XML reads a CR back as a line feed


@pytest.mark.parametrize("text", NOT_GUARDED)
def test_a_phone_or_signed_number_keeps_its_text_without_an_apostrophe(tmp_path: Path, text: str) -> None:
    assert not formula_like(text)
    assert _csv_and_xlsx_cell(tmp_path, text) == (text, text)


def _csv_and_xlsx_cell(tmp_path: Path, text: str) -> tuple[str, str]:
    """The cell ``text`` as a csv report and an xlsx table report write it."""
    write_csv(str(tmp_path / "r.csv"), ["note"], [[text]])
    with (tmp_path / "r.csv").open(newline="", encoding="utf-8") as fh:
        in_csv = list(csv.reader(fh))[1][0]
    with table_workbook(str(tmp_path / "r.xlsx")) as wb:
        wb.add_sheet("results", ["note"], [[text]])
    return in_csv, load_workbook(tmp_path / "r.xlsx")["results"]["A2"].value
