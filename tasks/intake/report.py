"""The validation report: the sheet's rows as read, with each row's errors and warnings beside them."""

from __future__ import annotations

import os
import posixpath
from collections import defaultdict

import fsspec
from payops.tasks.reports.xlsx import report_workbook, safe_cell
from payops.tasks.rows.payout_row import RowIssue

from .models import IntakeResult

ERROR_FILL = "#FFC7CE"
WARNING_FILL = "#FFEB9C"
_LARGE_ROWS = 50_000


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


def write_validation_report(result: IntakeResult, path: str | os.PathLike[str]) -> str:
    """Write an xlsx (local path or fsspec URL): ``row``, the original columns, ``errors`` and ``warnings``
    (messages joined by ``;``).

    Every cell is written as text; cells starting with ``= + - @`` are prefixed with ``'`` so a spreadsheet
    never evaluates them (formula injection). Error cells are shaded red, warnings of rows without errors
    yellow.
    """
    target = os.fspath(path)
    fs, local = fsspec.core.url_to_fs(target)
    if posixpath.dirname(local):
        fs.makedirs(posixpath.dirname(local), exist_ok=True)
    errors = _by_row(result.errors)
    warnings = _by_row(result.warnings)
    row_col = _free_name("row", result.columns)
    err_col = _free_name("errors", result.columns)
    warn_col = _free_name("warnings", result.columns + [err_col])
    header = [row_col, *result.columns, err_col, warn_col]
    with report_workbook(target, large=len(result.table) > _LARGE_ROWS) as book:
        sheet = book.add_worksheet("validation")
        red = book.add_format({"bg_color": ERROR_FILL, "pattern": 1})
        yellow = book.add_format({"bg_color": WARNING_FILL, "pattern": 1})
        sheet.freeze_panes(1, 0)
        sheet.write_row(0, 0, [safe_cell(h) for h in header], book.add_format({"bold": True}))
        last = len(header) - 1
        for r, record in enumerate(result.table, start=1):
            number = int(record["__row__"])
            error, warning = errors.get(number, ""), warnings.get(number, "")
            sheet.write_number(r, 0, number)
            sheet.write_row(r, 1, [safe_cell(record.get(column, "")) for column in result.columns])
            if error:
                sheet.write_string(r, last - 1, safe_cell(error), red)
            if warning:
                sheet.write_string(r, last, safe_cell(warning), None if error else yellow)
    return target
