"""Run reports: xlsx (results, summary, resubmit), csv and the JSON summary, to a folder or fsspec URL."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import fsspec

from tasks.attention import needs_retry, outcome_kind
from tasks.table_workbook import table_workbook
from tasks.xlsx import neutralise, write_csv

RESULT_COLUMNS = [
    "Reference (sent)",
    "Batch",
    "Submission",
    "Payout status",
    "Fee",
    "Failure reason",
    "Error code",
    "Error message",
    "Completed at",
]
RESUBMIT_SHEET = "resubmit"
"""The report's sheet of rows to pay again, read back by `tasks.retry_sheet`."""
_RESUBMIT_TAG = re.compile(r"-rs(\d+)$")
_UNSAFE_FILE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(slots=True)
class RowOutcome:
    """What happened to one sheet row."""

    row: int
    reference: str | None = None
    batch: str | None = None
    submission: str = "not sent"  # accepted, refused, invalid, not sent
    status: str | None = None
    fee: str | None = None
    failure_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    completed_at: str | None = None

    @property
    def needs_resubmit(self) -> bool:
        """Whether the resubmit sheet carries the row (`tasks.attention.needs_retry`)."""
        return needs_retry(self.submission, self.status)

    def cells(self) -> list[str | None]:
        return [
            self.reference,
            self.batch,
            self.submission,
            self.status,
            self.fee,
            self.failure_reason,
            self.error_code,
            self.error_message,
            self.completed_at,
        ]


REPORT_ROOT_ENV = "PAYOPS_REPORT_URL"
CONSOLE_URL_ENV = "PAYOPS_CONSOLE_URL"


def _absolute(location: str) -> str:
    """A local folder made absolute (an fsspec URL unchanged), without a trailing slash."""
    if "://" in location:
        return location.rstrip("/")
    return os.path.abspath(os.path.expanduser(location))


def default_report_dir() -> str:
    """Where reports go when no folder is given: ``PAYOPS_REPORT_URL`` (a folder or fsspec URL), else the
    ``reports`` folder under the payops home; never the working directory."""
    configured = os.environ.get(REPORT_ROOT_ENV)
    if configured:
        return _absolute(configured)
    from store import payops_home

    return str(payops_home() / "reports")


def report_root(report_dir: str) -> str:
    """The folder a run's reports go to: ``report_dir``, or `default_report_dir` when it is empty."""
    return report_dir or default_report_dir()


def console_report_url(path: str) -> str | None:
    """The console address serving the report at ``path`` (``{PAYOPS_CONSOLE_URL}/reports/<path under the
    report root>``), or None when no console is configured or the file lies outside the report root."""
    console = os.environ.get(CONSOLE_URL_ENV, "").strip().rstrip("/")
    if not console:
        return None
    root, target = default_report_dir(), _absolute(path)
    if not target.startswith(root + "/"):
        return None
    parts = target[len(root) + 1 :].split("/")
    if any(p in {"", ".", ".."} for p in parts):
        return None
    return f"{console}/reports/" + "/".join(quote(p, safe="") for p in parts)


def report_filename(label: str) -> str:
    return _UNSAFE_FILE.sub("-", label).strip("-.") or "run"


def resubmit_reference(reference: str) -> str:
    """A fresh, deterministic reference for paying a failed row again: `-rs1`, then `-rs2`, ..."""
    m = _RESUBMIT_TAG.search(reference)
    n = int(m.group(1)) + 1 if m else 1
    base = reference[: m.start()] if m else reference
    tag = f"-rs{n}"
    return base[: 64 - len(tag)] + tag


def report_paths(report_dir: str, label: str) -> dict[str, str]:
    base = report_root(report_dir).rstrip("/") + "/" + report_filename(label)
    return {
        "xlsx": base + ".xlsx",
        "csv": base + ".csv",
        "json": base + ".json",
        "validation": base + "-validation.xlsx",
    }


class ReportWouldOverwriteSource(ValueError):
    """A report path is the input sheet itself."""


def ensure_reports_spare_source(report_dir: str, label: str, source: str) -> None:
    """Refuse a run whose report would overwrite the sheet being paid (checked before anything is sent)."""

    def norm(p: str) -> str:
        fs, path = fsspec.core.url_to_fs(p)
        return f"{fs.protocol}:{fs._strip_protocol(path)}" if "://" in p else str(Path(path).resolve())

    src = norm(source)
    for path in report_paths(report_dir, label).values():
        if norm(path) == src:
            raise ReportWouldOverwriteSource(
                f"the report {path} would overwrite the sheet being paid; use another folder or label"
            )


def _result_headers(columns: Sequence[str]) -> list[str]:
    taken = set(RESULT_COLUMNS)
    return [f"{c} (sheet)" if c in taken else c for c in columns] + RESULT_COLUMNS


def results_rows(
    columns: Sequence[str], table: Iterable[Mapping[str, str]], outcomes: Mapping[int, RowOutcome]
) -> Iterator[list[Any]]:
    """The results sheet's rows, one at a time: the sheet's cells then the outcome's (the writers neutralise
    every cell)."""
    for rec in table:
        o = outcomes.get(int(rec["__row__"])) or RowOutcome(int(rec["__row__"]))
        yield [rec.get(c, "") for c in columns] + o.cells()


def resubmit_rows(
    columns: Sequence[str],
    table: Sequence[Mapping[str, str]],
    outcomes: Mapping[int, RowOutcome],
    reference_column: str | None,
) -> tuple[list[str], list[list[Any]]]:
    """Failed and refused rows with fresh references, in the sheet's own columns (its own reference column,
    whatever header the intake mapped, else a ``reference`` column first), ready to upload again.

    The cells are the sheet's own text, without the formula guard: payops reads them back
    (`tasks.xlsx.READ_BACK_RULE`)."""
    headers = list(columns) if reference_column else ["reference", *columns]
    rows = []
    for rec in table:
        o = outcomes.get(int(rec["__row__"]))
        if o is None or not o.needs_resubmit or not o.reference:
            continue
        fresh = resubmit_reference(o.reference)
        values = [fresh if c == reference_column else rec.get(c, "") for c in columns]
        rows.append(values if reference_column else [fresh, *values])
    return headers, rows


def summary_pairs(summary: Mapping[str, Any]) -> list[list[Any]]:
    pairs: list[list[Any]] = []
    for key, value in summary.items():
        if key in {"errors", "warnings", "row_outcomes", "attention_rows"}:
            pairs.append([key, len(value)])
        elif isinstance(value, dict):
            for k, v in value.items():
                pairs.append([f"{key}.{k}", json.dumps(v) if isinstance(v, dict | list) else v])
        elif isinstance(value, list):
            pairs.append([key, ", ".join(map(str, value))])
        else:
            pairs.append([key, value])
    return [[neutralise(k), neutralise(v)] for k, v in pairs]


def write_reports(
    report_dir: str,
    label: str,
    columns: Sequence[str],
    table: Sequence[Mapping[str, str]],
    outcomes: Mapping[int, RowOutcome],
    summary: dict[str, Any],
    reference_column: str | None,
) -> dict[str, str]:
    """Write LABEL.xlsx, LABEL.csv and LABEL.json under `report_dir` (a folder or an fsspec URL)."""
    paths = {k: v for k, v in report_paths(report_dir, label).items() if k != "validation"}
    fs, root = fsspec.core.url_to_fs(report_root(report_dir))
    fs.makedirs(root, exist_ok=True)
    summary["report_files"] = paths

    # Rows are generated as written, twice (xlsx, csv), rather than held: 100,000 rows of 17 cells are
    # ~200 MB as lists, and generating one costs ~2 µs.
    headers = _result_headers(columns)
    status_col, sub_col = headers.index("Payout status"), headers.index("Submission")

    def attention(r: Sequence[Any]) -> bool:
        return outcome_kind(r[sub_col], r[status_col]) is not None

    with table_workbook(paths["xlsx"]) as wb:
        wb.add_sheet("results", headers, results_rows(columns, table, outcomes), highlight=attention)
        wb.add_sheet("summary", ["field", "value"], summary_pairs(summary))
        rh, rr = resubmit_rows(columns, table, outcomes, reference_column)
        wb.add_sheet(RESUBMIT_SHEET, rh, rr, read_back=True)

    write_csv(paths["csv"], headers, results_rows(columns, table, outcomes))
    with fsspec.open(paths["json"], "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2, default=str)
    return paths


def outcome_dicts(outcomes: Mapping[int, RowOutcome]) -> list[dict[str, Any]]:
    return [asdict(o) for o in outcomes.values()]
