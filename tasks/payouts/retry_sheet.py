"""Retrying a run's failed rows, while it runs or after: the retry's label and its sheet.

The rows to pay again are recorded in the payops database (`store.retries`): by the run itself as they fail
or are refused (`tasks.payouts.retry_rows`), and from its report's ``resubmit`` sheet once it has finished. A
retry
**claims** the rows nobody claimed yet, all or none, under the next free label of the run's family
(``LABEL-retry1``, ``LABEL-retry2``, ...; a retry of ``LABEL-retry1`` takes the next free one too), so every
row is paid again by at most one retry, however many are started, before or after the run ends. The sheet's
references are the report's fresh ``-rsN`` ones, so a retry never replays or double-pays the original, and
re-running a retry (same label, same claimed rows, the same sheet) replays it instead of paying twice.

The retry sheet round-trips: the resubmit rows in the sheet's own columns, its own reference column included,
cells as the sheet wrote them, without the formula guard (`tasks.reports.xlsx.READ_BACK_RULE`), written as an
xlsx of text cells and read with the run's column mapping and sheet currency (a sheet without a currency
column: the one chosen for it or read from its amount header). So every sheet the intake accepted gives a
retry sheet it accepts.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import fsspec
from payops.connectors.payments.failure_words import fails_again
from payops.store.retries import RetryConflict, RetryRow, RetryRows
from payops.tasks.intake import IntakeOptions
from payops.tasks.intake.columns import parse_column_map, sheet_columns
from payops.tasks.payouts.fails_again import FailsAgain
from payops.tasks.reports.run_reports import (
    RESUBMIT_SHEET,
    report_filename,
    report_paths,
    report_root,
    resubmit_reference,
)
from payops.tasks.reports.table_workbook import TableWorkbook
from payops.tasks.rows.outcome import RETRY_KINDS
from payops.tasks.wire.references import LABEL_MAX

_RETRY_TAG = re.compile(r"-retry(\d+)$")
RETRY_ROOM = "-retry9999"
"""The room a retry label leaves for its ``-retryN``."""
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
    while_running: bool = False
    """The original run had not finished: the retry pays the rows that failed so far."""
    currency: str = ""
    """The sheet's currency the original run read it with ("": its rows had their own), for the retry."""
    fails_again: tuple[FailsAgain, ...] = ()
    """The rows it pays that will fail again as they are (`retry_reasons`)."""


class RetryReason(NamedTuple):
    """Why a row a retry pays failed: its row in the run's sheet, what happened and the next step in words
    (`connectors.payments.failure_words`), and whether it will fail again as it is (`fails_again`)."""

    row: int | None
    why: str
    next_step: str
    fails_again: bool


def retry_reasons(summary: Mapping[str, Any] | None) -> dict[str, RetryReason]:
    """Why each failed or refused row of a finished run failed, by the fresh reference its retry pays it
    under (`resubmit_reference`), from the run's summary (its ``attention_rows``: the first 10,000 rows
    needing a person); none for a run still running (its summary is not written yet)."""
    found: dict[str, RetryReason] = {}
    for a in (summary or {}).get("attention_rows") or []:
        if isinstance(a, dict) and a.get("kind") in RETRY_KINDS and a.get("reference"):
            found[resubmit_reference(str(a["reference"]))] = RetryReason(
                a.get("row"),
                str(a.get("reason") or ""),
                str(a.get("next_step") or ""),
                fails_again(a.get("code")),
            )
    return found


def retry_label(label: str) -> str:
    """``LABEL-retry1`` for an original run, ``LABEL-retry(N+1)`` for a retry ``LABEL-retryN``: the first
    candidate of :func:`next_retry_label`."""
    return next_retry_label(label, lambda _: False)


def next_retry_label(label: str, taken: Callable[[str], bool]) -> str:
    """The first ``BASE-retryN`` after ``label``'s own N that ``taken`` says is free (``BASE``: ``label``
    without its ``-retryN``): retries of a run and of its retries share one counter, so labels stay unique."""
    m = _RETRY_TAG.search(label)
    base, n = (label[: m.start()], int(m.group(1))) if m else (label, 0)
    while True:
        n += 1
        if not taken(candidate := f"{base}-retry{n}"):
            return candidate


def family_prefix(label: str) -> str:
    """What every retry label of ``label``'s family starts with."""
    m = _RETRY_TAG.search(label)
    return f"{label[: m.start()] if m else label}-retry"


def resubmit_table(report_xlsx: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the report's resubmit sheet (failed and refused rows, fresh references)."""
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
    return (rows[0], rows[1:]) if rows else ([], [])


def retry_sheet(rows: Sequence[RetryRow], drop: Collection[str] = ()) -> tuple[bytes, int]:
    """The retry sheet of ``rows`` (less the fresh references in ``drop``) as xlsx bytes, and its rows."""
    kept = [r for r in rows if r.reference not in drop]
    if not kept:
        return b"", 0
    header = list(kept[0].headers)
    data = [[dict(zip(r.headers, r.cells, strict=True)).get(h, "") for h in header] for r in kept]
    out = io.BytesIO()
    sheet = TableWorkbook(out)
    sheet.add_sheet(SHEET_TITLE, header, data, read_back=True)
    sheet.close()
    return out.getvalue(), len(data)


def run_column_map(report_dir: str, label: str) -> str:
    """The explicit column mapping run ``label`` was read with (its JSON summary's ``column_map``), or ""."""
    return _summary_text(report_dir, label, "column_map")


def run_currency(report_dir: str, label: str) -> str:
    """The sheet's currency run ``label`` read its rows with (its JSON summary's ``currency``), or ""."""
    return _summary_text(report_dir, label, "currency")


def _summary_text(report_dir: str, label: str, key: str) -> str:
    value = run_summary_json(report_dir, label).get(key)
    return value if isinstance(value, str) else ""


def run_summary_json(report_dir: str, label: str) -> dict[str, Any]:
    """Run ``label``'s JSON summary from its reports ({} when it has not finished or cannot be read)."""
    try:
        with fsspec.open(report_paths(report_dir, label)["json"], "r", encoding="utf-8") as fh:
            summary = json.load(fh)
    except (FileNotFoundError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def retry_exists(report_dir: str, retry: str) -> bool:
    """Whether the run ``retry`` already finished (its JSON report exists)."""
    fs, path = fsspec.core.url_to_fs(report_paths(report_dir, retry)["json"])
    return fs.exists(path)


def record_report(store: RetryRows, report_dir: str, label: str) -> bool:
    """Record the rows of finished run ``label``'s resubmit sheet (those the run did not record as they
    failed: refused rows, runs from before); False when the run has not finished (no JSON report)."""
    if not retry_exists(report_dir, label):
        return False
    header, data = resubmit_table(report_paths(report_dir, label)["xlsx"])
    if data:
        mapping, currency = run_column_map(report_dir, label), run_currency(report_dir, label)
        options = IntakeOptions(column_map=parse_column_map(mapping), default_currency=currency or None)
        ref = sheet_columns(header, options).fields["reference"]
        store.record(
            label, [RetryRow(r[ref], tuple(header), tuple(r), mapping, currency=currency) for r in data]
        )
    return True


@dataclass(frozen=True)
class RetryPlan:
    """What a retry of run ``of`` would pay now: the rows nobody claimed, under the next free label."""

    of: str
    label: str
    rows: list[RetryRow]
    finished: bool
    """Whether run ``of`` had finished (else its rows are the failures so far)."""

    @property
    def column_map(self) -> str:
        return self.rows[0].column_map if self.rows else ""

    @property
    def currency(self) -> str:
        return self.rows[0].currency if self.rows else ""


def plan_retry(store: RetryRows, report_dir: str, label: str, name: str | None = None) -> RetryPlan:
    """The rows of run ``label`` to pay again that no retry claimed (recorded so far, and from its report
    once it has finished), and the next free retry label (free: no retry of any run claimed it, and no report
    of that name is in ``report_dir``, as a retry from before claims has). The retry is named after
    ``name``, the name the run is shown by (default its label; `retry_base`)."""
    finished = record_report(store, report_dir, label)
    base = retry_base(name or label)
    used = store.labels_starting(family_prefix(base))
    retry = next_retry_label(base, lambda c: c in used or retry_exists(report_dir, c))
    return RetryPlan(label, retry, store.unclaimed(label), finished)


def retry_base(name: str) -> str:
    """What a run shown as ``name`` numbers its retries from: ``name`` (a retry's name keeps its
    ``-retryN``), cut so that ``BASE-retryN`` still fits a run label (`LABEL_MAX`)."""
    m = _RETRY_TAG.search(name)
    base, tag = (name[: m.start()], m.group()) if m else (name, "")
    return base[: LABEL_MAX - len(RETRY_ROOM)].rstrip("-_ ") + tag


def nothing_to_retry(store: RetryRows, plan: RetryPlan, report_dir: str) -> str:
    """Why a retry of ``plan.of`` pays nothing now."""
    label, retries = plan.of, list(store.retries(plan.of))
    if retries:
        last = retries[-1]
        return (
            f"a retry of {label} already ran as {', '.join(retries)} for every failed row "
            f"(report {report_paths(report_dir, last)['json']}); nothing was sent again. "
            f"To retry what failed in it: payops payouts retry-failed {last}"
        )
    if not plan.finished:
        return (
            f"run {label} has no failed or refused rows recorded so far, and no report "
            f"{report_paths(report_dir, label)['json']}: it has not finished, or its reports went elsewhere"
        )
    return f"run {label} has no failed or refused rows to retry"


def prepare_retry(report_dir: str, label: str, store: RetryRows, name: str | None = None) -> RetrySheet:
    """Claim the rows of run ``label`` (finished or still running) nobody retried yet, under the next free
    retry label (named after ``name``, the name the run is shown by: `plan_retry`), and write their sheet
    next to the reports. With none left, a retry that claimed rows but has not finished (no report:
    interrupted) is written again, to replay; else :class:`RetryRefused`."""
    plan = plan_retry(store, report_dir, label, name)
    retry, rows = plan.label, plan.rows
    if rows:
        try:
            store.claim(label, retry, [r.reference for r in rows])
        except RetryConflict as exc:
            raise RetryRefused(f"{exc}: another retry of {label} started meanwhile; run this again") from None
    else:
        unfinished = [r for r in store.retries(label) if not retry_exists(report_dir, r)]
        if not unfinished:
            raise RetryRefused(nothing_to_retry(store, plan, report_dir))
        retry, rows = unfinished[0], store.claimed_by(unfinished[0])
    data, count = retry_sheet(rows)
    source = f"{report_root(report_dir).rstrip('/')}/{report_filename(retry)}-sheet.xlsx"
    with fsspec.open(source, "wb") as fh:
        fh.write(data)
    reasons = retry_reasons(run_summary_json(report_dir, label)) if plan.finished else {}
    dead = tuple(
        FailsAgain(why.row, r.reference, why.why)
        for r in rows
        if (why := reasons.get(r.reference)) is not None and why.fails_again
    )
    return RetrySheet(
        retry,
        source,
        count,
        rows[0].column_map,
        while_running=not plan.finished,
        currency=rows[0].currency,
        fails_again=dead,
    )
