"""Writing report sheets: one sheet writer for every report (fast write-only workbooks, or normal ones)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.styles import Font, PatternFill
from openpyxl.utils import get_column_letter

HIGHLIGHT = PatternFill("solid", fgColor="FFF2CC")
_BOLD = Font(bold=True)
_RISKY = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> Any:
    """Defuse spreadsheet formula injection: text starting with = + - @ is prefixed with a quote."""
    if isinstance(value, str) and value.startswith(_RISKY):
        return "'" + value
    return value


def safe_cell(value: Any) -> Any:
    """A spreadsheet-safe cell: text, numbers and None as they are (neutralised); other values as text."""
    if value is None or isinstance(value, int | float | str):
        return neutralise(value)
    return neutralise(str(value))


def new_workbook() -> Workbook:
    """A streaming workbook: rows go straight to the file, so large reports stay fast and small."""
    return Workbook(write_only=True)


def add_sheet(
    wb: Workbook,
    title: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    highlight: Sequence[bool] | None = None,
) -> None:
    """Append a sheet with a bold, frozen header row; rows flagged in `highlight` are shaded.

    Works on write-only and normal workbooks alike (cells are appended, never revisited).
    """
    ws = wb.create_sheet(title)
    if not wb.write_only and len(wb.worksheets) == 2 and wb.worksheets[0].title == "Sheet":
        wb.remove(wb.worksheets[0])  # a normal workbook's empty default sheet
    for i, h in enumerate(headers, start=1):
        ws.column_dimensions[get_column_letter(i)].width = min(40, max(10, len(str(h)) + 2))
    ws.freeze_panes = "A2"

    def styled(value: Any, **style: Any) -> WriteOnlyCell:
        cell = WriteOnlyCell(ws, value=value)
        for k, v in style.items():
            setattr(cell, k, v)
        return cell

    ws.append([styled(h, font=_BOLD) for h in headers])
    for i, row in enumerate(rows):
        values = [safe_cell(v) for v in row]
        if highlight is not None and highlight[i]:
            ws.append([styled(v, fill=HIGHLIGHT) for v in values])
        else:
            ws.append(values)
