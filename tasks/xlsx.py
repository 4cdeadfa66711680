"""Writing report workbooks: one sheet writer for every report, built on XlsxWriter.

XlsxWriter writes a 10,000-row, 17-column results sheet in about half the time of openpyxl's write-only mode
(measured here: 0.95 s against 1.8 s), and report writing is on the payout flow's critical path. openpyxl
remains what tests read reports with, and it writes the template (data validation, text-formatted columns).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import fsspec
import xlsxwriter
from xlsxwriter.workbook import Workbook

HIGHLIGHT = "#FFF2CC"
"""Fill of rows that need attention (failed, refused, invalid)."""
_RISKY = frozenset("=+-@\t\r")
"""First characters a spreadsheet may run as a formula."""
_OPTIONS = {
    # Cells are data, never formulas, links or numbers guessed from text.
    "strings_to_formulas": False,
    "strings_to_urls": False,
    "strings_to_numbers": False,
    "nan_inf_to_errors": True,
}
_STREAM_ABOVE_ROWS = 50_000
"""Above this many rows a sheet is streamed (rows flushed as written): slower, but memory stays flat."""


def neutralise(value: Any) -> Any:
    """Defuse spreadsheet formula injection: text starting with = + - @ (or tab, CR) is prefixed with a quote.

    The one place of this rule: every xlsx and csv report cell and header goes through it (``safe_cell``,
    ``safe_row``, ``add_sheet``, ``write_csv``)."""
    if type(value) is str:
        return "'" + value if value[:1] in _RISKY else value
    if isinstance(value, str) and value[:1] in _RISKY:  # str subclasses (enums)
        return "'" + str(value)
    return value


def safe_cell(value: Any) -> Any:
    """A spreadsheet-safe cell: text, numbers and None as they are (neutralised); other values as text."""
    if value is None or isinstance(value, int | float | str):
        return neutralise(value)
    return neutralise(str(value))


def safe_row(values: Iterable[Any]) -> list[Any]:
    """Every value of a row (cells or a header row) through :func:`safe_cell`."""
    return [safe_cell(v) for v in values]


def write_csv(path: str, headers: Sequence[Any], rows: Iterable[Sequence[Any]]) -> None:
    """A csv report at ``path`` (local path or fsspec URL): the header line and every cell neutralised, as
    in the xlsx reports (a column header can carry a formula as well as a cell)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(safe_row(headers))
    writer.writerows(map(safe_row, rows))
    with fsspec.open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(buffer.getvalue())


@contextmanager
def report_workbook(path: str, *, large: bool = False) -> Iterator[Workbook]:
    """A workbook saved to ``path`` (local path or fsspec URL) when the block ends without an error.

    ``large``: stream rows to temporary files instead of holding them (for sheets over ~50k rows).
    """
    buffer = io.BytesIO()
    book = xlsxwriter.Workbook(buffer, {**_OPTIONS, "constant_memory": large, "in_memory": not large})
    try:
        yield book
    finally:
        book.close()
    with fsspec.open(path, "wb") as fh:
        fh.write(buffer.getvalue())


def is_large(rows: Sequence[Any]) -> bool:
    """Whether a sheet of ``rows`` should be written in streaming mode."""
    return len(rows) > _STREAM_ABOVE_ROWS


def add_sheet(
    book: Workbook,
    title: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    highlight: Sequence[bool] | None = None,
    fill: str = HIGHLIGHT,
) -> None:
    """Append a sheet with a bold, frozen header row; rows flagged in ``highlight`` get ``fill``."""
    sheet = book.add_worksheet(title)
    bold = book.add_format({"bold": True})
    shaded = book.add_format({"bg_color": fill, "pattern": 1})
    for i, h in enumerate(headers):
        sheet.set_column(i, i, min(40, max(10, len(str(h)) + 2)))
    sheet.freeze_panes(1, 0)
    sheet.write_row(0, 0, safe_row(headers), bold)
    write = sheet.write_row
    for r, row in enumerate(rows, start=1):
        values = safe_row(row)
        if highlight is not None and highlight[r - 1]:
            write(r, 0, values, shaded)
        else:
            write(r, 0, values)
