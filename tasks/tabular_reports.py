"""Write one table plus a run summary as NAME.xlsx, NAME.csv and NAME.json (folder or fsspec URL).

Generic: any flow whose report is "a list of rows and a summary dict" uses this. Cells are defused against
spreadsheet formula injection (headers too) with `tasks.xlsx.neutralise`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import fsspec

from tasks.reports import report_filename, summary_pairs
from tasks.table_workbook import table_workbook
from tasks.xlsx import HIGHLIGHT, write_csv


def write_table_reports(
    report_dir: str,
    name: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    summary: Mapping[str, Any],
    *,
    sheet_title: str = "results",
    highlight: Sequence[bool] | None = None,
    fill: str = HIGHLIGHT,
    extra_sheets: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]]]] = (),
) -> dict[str, str]:
    """Write NAME.xlsx (table + summary sheets), NAME.csv (table) and NAME.json (summary + rows as objects).

    Rows flagged in `highlight` are filled with `fill`; `extra_sheets` (title, headers, rows) follow the
    summary. Returns the paths by kind. `summary` must not hold secrets: it is written as is.
    """
    base = report_dir.rstrip("/") + "/" + report_filename(name)
    paths = {"xlsx": base + ".xlsx", "csv": base + ".csv", "json": base + ".json"}
    fs, root = fsspec.core.url_to_fs(report_dir)
    fs.makedirs(root, exist_ok=True)

    with table_workbook(paths["xlsx"]) as wb:
        wb.add_sheet(sheet_title, headers, rows, highlight=highlight, fill=fill)
        wb.add_sheet("summary", ["field", "value"], summary_pairs({**summary, "report_files": paths}))
        for title, sheet_headers, sheet_rows in extra_sheets:
            wb.add_sheet(title, sheet_headers, sheet_rows)

    write_csv(paths["csv"], headers, rows)

    document = {
        **summary,
        "report_files": paths,
        sheet_title: [dict(zip(headers, r, strict=True)) for r in rows],
    }
    with fsspec.open(paths["json"], "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=2, default=str)
    return paths
