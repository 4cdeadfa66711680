"""Retrying a run's failed rows: the resubmission sheet from the run's report, under a label derived from the
run's own.

The label of a retry is a pure function of the original label and the attempt (``LABEL-retry1``, and a retry
of that is ``LABEL-retry2``), and the sheet's references are the report's fresh ``-rsN`` ones. So a retry can
never replay or double-pay the original, and starting the same retry twice replays it instead of paying twice;
once a retry has finished, a second one is refused with the name of the first.

The retry sheet round-trips: it is the report's ``resubmit`` sheet (the failed and refused rows in the sheet's
own columns, its own reference column included, cells as the sheet wrote them, without the formula guard:
`tasks.xlsx.READ_BACK_RULE`), written as an xlsx of text cells, and read with the run's column mapping. So
every sheet the intake accepted gives a retry sheet it accepts.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Collection
from dataclasses import dataclass

import fsspec

from tasks.intake.columns import map_columns, parse_column_map
from tasks.reports import RESUBMIT_SHEET, report_filename, report_paths, report_root
from tasks.table_workbook import TableWorkbook

_RETRY_TAG = re.compile(r"-retry(\d+)$")
SHEET_TITLE = "payouts"
"""The retry sheet's one sheet: the name the intake reads first."""


class RetryRefused(ValueError):
    """The retry cannot be built: no report, nothing to retry, or a retry already ran (the message says)."""


@dataclass(frozen=True)
class RetrySheet:
    label: str
    source: str
    rows: int
    column_map: str = ""
    """The original run's explicit column mapping (`tasks.intake.columns.parse_column_map`), for the retry."""


def retry_label(label: str) -> str:
    """``LABEL-retry1`` for an original run, ``LABEL-retry(N+1)`` for a retry ``LABEL-retryN``."""
    m = _RETRY_TAG.search(label)
    return f"{label[: m.start()]}-retry{int(m.group(1)) + 1}" if m else f"{label}-retry1"


def resubmission_sheet(
    report_xlsx: str, drop: Collection[str] = (), column_map: str = ""
) -> tuple[bytes, int]:
    """The report's resubmit sheet (failed and refused rows with fresh references) as xlsx bytes, and its row
    count. ``drop``: fresh references of rows the operator left out (the reference column found as the intake
    finds it, with the run's ``column_map``)."""
    from openpyxl import load_workbook

    try:
        with fsspec.open(report_xlsx, "rb") as fh:
            book = load_workbook(io.BytesIO(fh.read()), read_only=True, data_only=True)
    except FileNotFoundError:
        missing = f"no report {report_xlsx}: the run has not finished, or its reports went elsewhere"
        raise RetryRefused(missing) from None
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise RetryRefused(f"the report {report_xlsx} cannot be read: {exc}") from None
    try:
        if RESUBMIT_SHEET not in book.sheetnames:
            raise RetryRefused(f"the report {report_xlsx} has no '{RESUBMIT_SHEET}' sheet")
        rows = [
            ["" if v is None else str(v) for v in row]
            for row in book[RESUBMIT_SHEET].iter_rows(values_only=True)
        ]
    finally:
        book.close()
    if not rows:
        return b"", 0
    header, data = rows[0], rows[1:]
    if drop:
        mapped = map_columns(header, currency_defaulted=True, explicit=parse_column_map(column_map))
        ref = mapped.fields["reference"]
        data = [r for r in data if r[ref] not in drop]
    out = io.BytesIO()
    sheet = TableWorkbook(out)
    sheet.add_sheet(SHEET_TITLE, header, data, read_back=True)
    sheet.close()
    return out.getvalue(), len(data)


def run_column_map(report_dir: str, label: str) -> str:
    """The explicit column mapping run ``label`` was read with (its JSON summary's ``column_map``), or ""."""
    try:
        with fsspec.open(report_paths(report_dir, label)["json"], "r", encoding="utf-8") as fh:
            summary = json.load(fh)
    except (FileNotFoundError, ValueError):
        return ""
    mapping = summary.get("column_map") if isinstance(summary, dict) else None
    return mapping if isinstance(mapping, str) else ""


def retry_exists(report_dir: str, retry: str) -> bool:
    """Whether the retry run ``retry`` already finished (its JSON report exists)."""
    fs, path = fsspec.core.url_to_fs(report_paths(report_dir, retry)["json"])
    return fs.exists(path)


def prepare_retry(report_dir: str, label: str) -> RetrySheet:
    """Write the resubmission sheet of run ``label`` next to its reports, named for the retry's label."""
    retry = retry_label(label)
    if retry_exists(report_dir, retry):
        raise RetryRefused(
            f"a retry of {label} already ran as {retry} (report {report_paths(report_dir, retry)['json']}); "
            f"nothing was sent again. To retry what failed in it: payops payouts retry-failed {retry}"
        )
    data, count = resubmission_sheet(report_paths(report_dir, label)["xlsx"])
    if count == 0:
        raise RetryRefused(f"run {label} has no failed or refused rows to retry")
    source = f"{report_root(report_dir).rstrip('/')}/{report_filename(retry)}-sheet.xlsx"
    with fsspec.open(source, "wb") as fh:
        fh.write(data)
    return RetrySheet(label=retry, source=source, rows=count, column_map=run_column_map(report_dir, label))
