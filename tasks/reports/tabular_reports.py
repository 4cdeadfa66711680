"""Write one table plus a run summary as NAME.xlsx, NAME.csv and NAME.json (folder or fsspec URL).

Generic: any flow whose report is "a list of rows and a summary dict" uses this. Cells are defused against
spreadsheet formula injection (headers too) with `tasks.reports.xlsx.neutralise`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import IO, Any

import fsspec
import orjson
from payops.tasks.reports.run_reports import report_filename, report_root, summary_pairs
from payops.tasks.reports.table_workbook import table_workbook
from payops.tasks.reports.xlsx import HIGHLIGHT, write_csv


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
    folder = report_root(report_dir)
    base = folder.rstrip("/") + "/" + report_filename(name)
    paths = {"xlsx": base + ".xlsx", "csv": base + ".csv", "json": base + ".json"}
    fs, root = fsspec.core.url_to_fs(folder)
    fs.makedirs(root, exist_ok=True)

    with table_workbook(paths["xlsx"]) as wb:
        wb.add_sheet(sheet_title, headers, rows, highlight=highlight, fill=fill)
        wb.add_sheet("summary", ["field", "value"], summary_pairs({**summary, "report_files": paths}))
        for title, sheet_headers, sheet_rows in extra_sheets:
            wb.add_sheet(title, sheet_headers, sheet_rows)

    write_csv(paths["csv"], headers, rows)

    with fsspec.open(paths["json"], "wb") as fh:
        write_json_document(fh, {**summary, "report_files": paths}, sheet_title, headers, rows)
    return paths


_JSON_OPTIONS = (
    orjson.OPT_INDENT_2
    | orjson.OPT_NON_STR_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
"""As ``json.dump(indent=2, default=str)`` writes: dates and dataclasses through ``str``; str, int and dict
subclasses (enums) as their values."""
_JSON_ROWS_PER_WRITE = 2000


def write_json_document(
    fh: IO[bytes], head: Mapping[str, Any], key: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """``{**head, key: [one object per row]}`` as indented JSON (values that are not JSON as their text),
    written a few thousand rows at a time: ``json.dump`` with an indent runs its pure-Python encoder (seconds
    for a 100,000-row report) and one whole document would be held as one string. Hand-rolled around orjson
    for that: each chunk of rows is an indented list whose brackets are dropped and whose lines are indented
    one level more, which holds because JSON text never carries a raw newline inside a value."""
    marker = f"rows-{uuid.uuid4().hex}"  # where the rows go (``key`` in ``head`` keeps its place, as in json)
    document = orjson.dumps({**head, key: marker}, default=str, option=_JSON_OPTIONS)
    before, found, after = document.partition(f'"{marker}"'.encode())
    if not found or marker.encode() in after:
        raise AssertionError("the rows' place in the JSON report was not found once")
    if not rows:
        fh.write(before + b"[]" + after)
        return
    indent = _indent(before)
    fh.write(before + b"[")
    for start in range(0, len(rows), _JSON_ROWS_PER_WRITE):
        objects = [dict(zip(headers, r, strict=True)) for r in rows[start : start + _JSON_ROWS_PER_WRITE]]
        items = orjson.dumps(objects, default=str, option=_JSON_OPTIONS)[1:-2]  # without "[" and "\n]"
        fh.write((b"," if start else b"") + items.replace(b"\n", b"\n" + b" " * indent))
    fh.write(b"\n" + b" " * indent + b"]" + after)


def _indent(before: bytes) -> int:
    """The indent of the line the rows' key is on (2 at the top level of the document)."""
    line = before[before.rfind(b"\n") + 1 :]
    return len(line) - len(line.lstrip(b" "))
