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

from tasks.reports import report_filename, summary_pairs
from tasks.xlsx import add_sheet, new_workbook, safe_cell


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

    wb = new_workbook()
    add_sheet(wb, sheet_title, headers, rows, highlight=highlight)
    add_sheet(wb, "summary", ["field", "value"], summary_pairs({**summary, "report_files": paths}))
    with fsspec.open(paths["xlsx"], "wb") as fh:
        wb.save(fh)

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(headers)
    writer.writerows([safe_cell(v) for v in row] for row in rows)
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
