"""Write one table plus a run summary as NAME.xlsx, NAME.csv and NAME.json (folder or fsspec URL).

Generic: any flow whose report is "a list of rows and a summary dict" uses this. Cells are defused against
spreadsheet formula injection with `tasks.reports.neutralise`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import fsspec
from openpyxl import Workbook
from openpyxl.styles import Font, PatternFill
from openpyxl.utils import get_column_letter

from tasks.reports import neutralise, report_filename, summary_pairs

_HIGHLIGHT = PatternFill("solid", fgColor="FFF2CC")


def _cell(value: Any) -> Any:
    """A spreadsheet-safe cell: text, numbers and None as is; anything else as its text."""
    if value is None or isinstance(value, int | float | str):
        return neutralise(value)
    return neutralise(str(value))


def add_sheet(
    wb: Workbook,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    first: bool = False,
    highlight: Sequence[bool] | None = None,
) -> None:
    """Append a sheet with a bold, frozen header row; rows flagged in `highlight` are shaded."""
    ws = wb.active if first else wb.create_sheet(title)
    ws.title = title
    ws.append(list(headers))
    for cell in ws[1]:
        cell.font = Font(bold=True)
    for i, row in enumerate(rows):
        ws.append([_cell(v) for v in row])
        if highlight is not None and highlight[i]:
            for c in range(1, len(headers) + 1):
                ws.cell(i + 2, c).fill = _HIGHLIGHT
    for i, h in enumerate(headers, start=1):
        ws.column_dimensions[get_column_letter(i)].width = min(40, max(10, len(str(h)) + 2))
    ws.freeze_panes = "A2"


def write_table_reports(
    report_dir: str,
    name: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    summary: Mapping[str, Any],
    *,
    sheet_title: str = "results",
    highlight: Sequence[bool] | None = None,
) -> dict[str, str]:
    """Write NAME.xlsx (table + summary sheets), NAME.csv (table) and NAME.json (summary + rows as objects).

    Returns the paths by kind. `summary` must not hold secrets: it is written as is.
    """
    base = report_dir.rstrip("/") + "/" + report_filename(name)
    paths = {"xlsx": base + ".xlsx", "csv": base + ".csv", "json": base + ".json"}
    fs, root = fsspec.core.url_to_fs(report_dir)
    fs.makedirs(root, exist_ok=True)

    wb = Workbook()
    add_sheet(wb, sheet_title, headers, rows, first=True, highlight=highlight)
    add_sheet(wb, "summary", ["field", "value"], summary_pairs({**summary, "report_files": paths}))
    with fsspec.open(paths["xlsx"], "wb") as fh:
        wb.save(fh)

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(headers)
    writer.writerows([_cell(v) for v in row] for row in rows)
    with fsspec.open(paths["csv"], "w", encoding="utf-8", newline="") as fh:
        fh.write(buf.getvalue())

    document = {
        **summary,
        "report_files": paths,
        sheet_title: [dict(zip(headers, r, strict=True)) for r in rows],
    }
    with fsspec.open(paths["json"], "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=2, default=str)
    return paths
