"""The validation report: the sheet's rows as read, with each row's errors and warnings beside them."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.styles import Font, PatternFill

from tasks.xlsx import neutralise

from .models import IntakeResult, RowIssue

_ERROR_FILL = PatternFill("solid", fgColor="FFC7CE")
_WARNING_FILL = PatternFill("solid", fgColor="FFEB9C")


def _by_row(issues: list[RowIssue]) -> dict[int, str]:
    joined: dict[int, list[str]] = defaultdict(list)
    for issue in issues:
        joined[issue.row].append(f"{issue.column}: {issue.message}")
    return {row: "; ".join(messages) for row, messages in joined.items()}


def _free_name(name: str, taken: list[str]) -> str:
    folded = {t.casefold() for t in taken}
    candidate = name
    while candidate.casefold() in folded:
        candidate = f"{candidate} (payops)"
    return candidate


def write_validation_report(result: IntakeResult, path: Path) -> Path:
    """Write an xlsx: ``row``, the original columns, ``errors`` and ``warnings`` (messages joined by ``;``).

    Every cell is written as text; cells starting with ``= + - @`` are prefixed with ``'`` so a spreadsheet
    never evaluates them (formula injection). Rows with errors are shaded red, with only warnings yellow.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    errors = _by_row(result.errors)
    warnings = _by_row(result.warnings)
    row_col = _free_name("row", result.columns)
    err_col = _free_name("errors", result.columns)
    warn_col = _free_name("warnings", result.columns + [err_col])
    book = Workbook(write_only=True)
    sheet = book.create_sheet("validation")
    sheet.freeze_panes = "A2"
    bold = Font(bold=True)
    header = [row_col, *result.columns, err_col, warn_col]
    sheet.append([_styled(sheet, neutralise(h), font=bold) for h in header])
    for record in result.table:
        number = int(record["__row__"])
        error = errors.get(number, "")
        warning = warnings.get(number, "")
        fill = _ERROR_FILL if error else _WARNING_FILL if warning else None
        cells = [_styled(sheet, number)]
        cells += [_styled(sheet, neutralise(record.get(column, ""))) for column in result.columns]
        cells.append(_styled(sheet, neutralise(error), fill=fill))
        cells.append(_styled(sheet, neutralise(warning), fill=fill if not error else None))
        sheet.append(cells)
    book.save(path)
    return path


def _styled(
    sheet: object, value: object, *, font: Font | None = None, fill: PatternFill | None = None
) -> object:
    cell = WriteOnlyCell(sheet, value=value)
    if isinstance(value, str):
        cell.data_type = "s"
    if font is not None:
        cell.font = font
    if fill is not None:
        cell.fill = fill
    return cell
