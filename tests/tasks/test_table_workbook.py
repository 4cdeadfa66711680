"""The streaming table writer reads back like the XlsxWriter workbook it replaced (openpyxl, calamine)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest
import xlsxwriter
from openpyxl import load_workbook
from payops.tasks.reports.table_workbook import table_workbook
from payops.tasks.reports.xlsx import HIGHLIGHT, quote_prefixed, safe_row

HEADERS = ["reference", "payee", "amount", "=HYPERLINK(1)", "count", "ok", "note"]
ROWS = [
    ["R-1", "Ama & <Kofi>", "10.50", "x", 3, True, None],
    ["R-2", "=cmd|' /C calc'!A0", "-5", "@SUM(A1)", 2.5, False, "  padded  "],
    ["R-3", "tab\tand\nnewline", "+1", "ctrl\x01char", 10**12, None, "é ü 漢字"],
    ["R-4", "", "0.01", None, float("nan"), 0, "x" * 40_000],
]
FLAGS = [False, True, False, True]


def _xlsxwriter_reference(path: Path) -> None:
    """What tasks/reports/xlsx.py wrote with XlsxWriter before (same options, formats, widths and pane)."""
    book = xlsxwriter.Workbook(
        str(path),
        {
            "strings_to_formulas": False,
            "strings_to_urls": False,
            "strings_to_numbers": False,
            "nan_inf_to_errors": True,
        },
    )
    for title, rows, flags in (("results", ROWS, FLAGS), ("summary", [["a", 1]], None)):
        headers = HEADERS if title == "results" else ["field", "value"]
        sheet = book.add_worksheet(title)
        bold = book.add_format({"bold": True})
        shaded = book.add_format({"bg_color": HIGHLIGHT, "pattern": 1})
        quoted = {
            False: book.add_format({"quote_prefix": True}),
            True: book.add_format({"quote_prefix": True, "bg_color": HIGHLIGHT, "pattern": 1}),
        }
        for i, h in enumerate(headers):
            sheet.set_column(i, i, min(40, max(10, len(str(h)) + 2)))
        sheet.freeze_panes(1, 0)
        sheet.write_row(0, 0, safe_row(headers), bold)
        for r, row in enumerate(rows, start=1):
            flagged = bool(flags and flags[r - 1])
            sheet.write_row(r, 0, safe_row(row), shaded if flagged else None)
            for c, v in enumerate(row):  # a signed number stays text by Excel's quote prefix, no apostrophe
                if isinstance(v, str) and quote_prefixed(v):
                    sheet.write_string(r, c, v, quoted[flagged])
    book.close()


def _streamed(path: Path) -> None:
    with table_workbook(str(path)) as book:
        book.add_sheet("results", HEADERS, iter(ROWS), highlight=FLAGS)
        book.add_sheet("summary", ["field", "value"], [["a", 1]])


def _same(a: object, b: object) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("read_only", [False, True])
def test_values_read_back_as_xlsxwriter_wrote_them(tmp_path: Path, read_only: bool) -> None:
    _xlsxwriter_reference(tmp_path / "ref.xlsx")
    _streamed(tmp_path / "new.xlsx")
    ref = load_workbook(tmp_path / "ref.xlsx", read_only=read_only)
    new = load_workbook(tmp_path / "new.xlsx", read_only=read_only)
    assert new.sheetnames == ref.sheetnames == ["results", "summary"]
    for title in ref.sheetnames:
        want = list(ref[title].iter_rows(values_only=True))
        got = list(new[title].iter_rows(values_only=True))
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert all(_same(x, y) for x, y in zip(g, w, strict=True)), (g, w)
    rows = list(new["results"].iter_rows(values_only=True))
    assert rows[0][3] == "'=HYPERLINK(1)"  # headers are defused too
    assert rows[2][1] == "'=cmd|' /C calc'!A0" and rows[2][2] == "-5" and rows[3][2] == "+1"
    if not read_only:
        results = new["results"]
        assert results["C3"].quotePrefix and results["C4"].quotePrefix and not results["B3"].quotePrefix
        assert results["C3"].data_type == "s"  # text, not the number -5
    assert rows[3][3] == "ctrl_x0001_char"  # a control character in Excel's escape, as XlsxWriter writes it
    assert len(rows[4][6]) == 32_767  # Excel's cell limit, as XlsxWriter truncates


def test_format_matches_xlsxwriter(tmp_path: Path) -> None:
    _xlsxwriter_reference(tmp_path / "ref.xlsx")
    _streamed(tmp_path / "new.xlsx")
    ref, new = (
        load_workbook(tmp_path / "ref.xlsx")["results"],
        load_workbook(tmp_path / "new.xlsx")["results"],
    )
    assert new.freeze_panes == ref.freeze_panes == "A2"
    for col in "ABCDEFG":
        assert new.column_dimensions[col].width == ref.column_dimensions[col].width
    assert all(new.cell(1, c).font.b for c in range(1, 8))
    for r in range(2, 6):
        for c in range(1, 8):
            assert new.cell(r, c).fill.fgColor.rgb == ref.cell(r, c).fill.fgColor.rgb, (r, c)
            assert bool(new.cell(r, c).font.b) is False
    assert new.cell(3, 1).fill.fgColor.rgb.endswith("FFF2CC") and new.cell(5, 7).fill.fgColor.rgb.endswith(
        "FFF2CC"
    )
    assert new.cell(2, 1).fill.fgColor.rgb == "00000000"


def test_calamine_reads_it_like_the_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What payops reads sheets with: the same cells, text that looks like Excel's escape included."""
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "ROWS", [*ROWS, ["R-5", "_x0041_ literal", "1", "", 1, 1, ""]])
    monkeypatch.setattr(module, "FLAGS", [*FLAGS, False])
    _xlsxwriter_reference(tmp_path / "ref.xlsx")
    _streamed(tmp_path / "new.xlsx")
    kw = {"sheet_name": "results", "engine": "calamine", "dtype": str, "keep_default_na": False}
    pd.testing.assert_frame_equal(
        pd.read_excel(tmp_path / "new.xlsx", **kw), pd.read_excel(tmp_path / "ref.xlsx", **kw)
    )


def test_a_failed_report_leaves_no_file(tmp_path: Path) -> None:
    def rows():
        yield ["a"]
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError), table_workbook(str(tmp_path / "r.xlsx")) as book:
        book.add_sheet("results", ["h"], rows())
    assert not (tmp_path / "r.xlsx").exists()


def test_bad_sheet_titles_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sheet title"), table_workbook(str(tmp_path / "r.xlsx")) as book:
        book.add_sheet("a/b", ["h"], [])


def test_money_and_times_are_numbers_and_date_times(tmp_path: Path) -> None:
    """Decimals are numbers in a two-decimal currency format, datetimes Excel date-times (UTC), shaded too."""
    from datetime import UTC, datetime, timedelta, timezone
    from decimal import Decimal

    when = datetime(2026, 11, 22, 10, 30, 15, tzinfo=timezone(timedelta(hours=1)))
    rows = [[Decimal("1234.50"), when, "+233 24 123 4567"], [Decimal("0.01"), None, "0244000001"]]
    with table_workbook(str(tmp_path / "t.xlsx")) as book:
        book.add_sheet("results", ["amount", "completed at (UTC)", "number"], rows, highlight=[True, False])
    sheet = load_workbook(tmp_path / "t.xlsx")["results"]
    assert sheet["A2"].value == 1234.5 and sheet["A2"].number_format == "#,##0.00"
    assert sheet["A2"].fill.fgColor.rgb.endswith("FFF2CC") and sheet["A3"].fill.fgColor.rgb == "00000000"
    assert sheet["B2"].value == datetime(2026, 11, 22, 9, 30, 15) and sheet["B2"].is_date
    assert when.astimezone(UTC).replace(tzinfo=None) == sheet["B2"].value
    assert sheet["C2"].value == "+233 24 123 4567" and sheet["C2"].quotePrefix
    assert sheet["C3"].value == "0244000001" and sheet["C3"].data_type == "s"
    assert sum(Decimal(str(sheet.cell(r, 1).value)) for r in (2, 3)) == Decimal("1234.51")


@pytest.mark.parametrize(("rows", "sheets"), [(7, [3, 3, 1]), (6, [3, 3]), (0, [0])])
def test_a_table_longer_than_a_sheet_continues_on_the_next(
    rows: int, sheets: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payops.tasks.reports import table_workbook as module

    monkeypatch.setattr(module, "SHEET_ROWS", 3)  # Excel's 1,048,575 data rows, made small
    path = tmp_path / "long.xlsx"
    with table_workbook(str(path)) as wb:
        written = wb.add_long_sheet("results", ["n", "text"], ([i, f"row {i}"] for i in range(rows)))
        wb.add_sheet("summary", ["field", "value"], [["rows", rows]])
    assert written == rows
    book = load_workbook(path)
    names = ["results"] + [f"results {k}" for k in range(2, len(sheets) + 1)]
    assert book.sheetnames == [*names, "summary"]
    seen = []
    for name, count in zip(names, sheets, strict=True):
        values = list(book[name].iter_rows(values_only=True))
        assert values[0] == ("n", "text") and len(values) - 1 == count
        seen += [v[0] for v in values[1:]]
    assert seen == list(range(rows))
