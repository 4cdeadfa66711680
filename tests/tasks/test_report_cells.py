"""Report cells: money stays a number in a csv report (finance sums it), text that a spreadsheet could run
as a formula is still guarded."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

from payops.tasks.reports.xlsx import safe_cell, write_csv


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
    assert read[2] == ["1500.00", "'=HYPERLINK(\"http://x.example\",\"pay\")"]


def test_a_decimal_cell_is_a_number_and_text_is_guarded() -> None:
    assert safe_cell(Decimal("-1.50")) == Decimal("-1.50")
    assert safe_cell("-1.50") == "'-1.50"
    assert safe_cell("@SUM(A1)") == "'@SUM(A1)"
