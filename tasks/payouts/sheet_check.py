"""The intake step of a payout run as plain functions: read and validate the sheet, name the run, the
summary's intake fields, the validation report.

`payops check` and the `payout-spreadsheet` flow both call these (the flow through its thin tasks), so the
console, the check and the flow can never disagree about a sheet. Nothing here imports Prefect: the check
answers in about a second.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from decimal import Decimal
from itertools import chain
from pathlib import Path
from typing import Any, Literal, TypeVar

from payops.tasks.intake import (
    IntakeError,
    IntakeOptions,
    IntakeResult,
    read_payout_sheet,
    write_validation_report,
)
from payops.tasks.intake.columns import format_column_map
from payops.tasks.intake.streaming import stream_csv, streams
from payops.tasks.payouts.paid_before import PaidBefore, paid_before
from payops.tasks.payouts.run_summary import EarlierRun, PayoutRunSummary, SheetCheckSummary
from payops.tasks.payouts.spill import RowSpill
from payops.tasks.payouts.spill_views import SpilledRows, SpilledTable
from payops.tasks.reports.run_reports import ensure_reports_spare_source, report_paths
from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.runtime.run_meter import RunMeter
from payops.tasks.runtime.run_outcomes import Outcome
from payops.tasks.runtime.run_summary import RowProblem
from payops.tasks.wire.money import money
from payops.tasks.wire.references import content_label
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

InvalidRows = Literal["refuse", "skip"]
S = TypeVar("S", bound=PayoutRunSummary)


def canonical_rows(rows: Iterable[PayoutRow]) -> Iterator[tuple[object, ...]]:
    """What a sheet's default label fingerprints: the validated content, not the file's bytes."""
    for r in rows:
        yield (
            r.row,
            r.reference,
            r.amount,
            r.currency,
            r.provider,
            r.destination_type,
            r.destination,
            r.note,
        )


def run_label(
    label: str | None,
    intake: IntakeResult,
    column_map: dict[str, str] | None = None,
    currency: str | None = None,
) -> str:
    """The run's label: the one given, else a fingerprint of the validated rows and, when given, the explicit
    column mapping and the currency chosen for the sheet (a sheet read another way is other content; without
    them, the label is what it always was)."""
    if label:
        return label
    mapping = [("column_map", format_column_map(column_map))] if column_map else []
    chosen = [("currency", currency)] if currency else []
    return content_label(chain(canonical_rows(intake.rows), mapping, chosen))


def sheet_fingerprint(
    intake: IntakeResult, column_map: dict[str, str] | None = None, currency: str | None = None
) -> str:
    """The fingerprint of a sheet's validated content (and how it was read): the label a run of it takes
    when none is given. Two uploads of the same sheet, under any file name, have the same one."""
    return run_label(None, intake, column_map, currency)


def no_name_column(intake: IntakeResult) -> str | None:
    """Why no payee name can be checked in this sheet (it has no payee-name column), or None."""
    if "payee_name" in intake.mapped:
        return None
    ignored = ", ".join(intake.ignored) or "none"
    return (
        f"no payee-name column, so no payee name is checked (ignored columns: {ignored}); "
        'name it with the column mapping (--column "Header=payee_name", or the run\'s column_map)'
    )


@dataclass(frozen=True)
class SheetRefused:
    """A refused file: the message, and the summary's ``errors`` (row/column filled where it is located)."""

    message: str
    errors: list[dict[str, object]]


def refusal_summary(
    source: str, label: str | None, errors: Iterable[dict[str, Any]], model: type[S] = PayoutRunSummary
) -> S:
    """The summary of a sheet refused as a whole (wrong type, too large, unsafe, no header...)."""
    return model.head(source, label, errors=list(errors), outcome=Outcome.INVALID_INPUT)


def intake_summary(
    source: str,
    label: str,
    intake: IntakeResult,
    column_map: dict[str, str] | None = None,
    model: type[S] = PayoutRunSummary,
) -> S:
    """The summary's intake fields of a read sheet (outcome ``completed`` until decided otherwise), with the
    columns mapped to no field (``ignored_columns``), the explicit mapping when one was given, the sheet's
    currency when rows take it (``currency``, and ``currency_header`` when read from the amount header), and
    a note when the sheet has no payee-name column."""
    summary = model.head(source, label)
    summary.rows_total = intake.rows_total
    summary.rows_valid = len(intake.rows)
    summary.rows_invalid = intake.rows_invalid
    summary.errors = [RowProblem(row=e.row, column=e.column, message=e.message) for e in intake.errors]
    summary.warnings = [RowProblem(row=w.row, column=w.column, message=w.message) for w in intake.warnings]
    summary.amount_total = money(sum((r.amount for r in intake.rows), Decimal(0)))
    summary.ignored_columns = list(intake.ignored)
    if column_map:
        summary.column_map = format_column_map(column_map)
    if intake.currency:
        summary.currency = intake.currency
        if intake.currency_header:
            summary.currency_header = intake.currency_header
    if why := no_name_column(intake):
        summary.notes = [why]
    return summary


def refuses(intake: IntakeResult, on_invalid_rows: InvalidRows) -> bool:
    """Whether the sheet is refused as a whole: any invalid row refuses it unless invalid rows are skipped."""
    return bool(intake.errors) and on_invalid_rows == "refuse"


def read_sheet(source: str, options: IntakeOptions) -> IntakeResult | SheetRefused:
    """Read and validate every row; a sheet refused as a whole is a result, not an exception."""
    try:
        return read_payout_sheet(source, options)
    except IntakeError as exc:
        return SheetRefused(str(exc), exc.errors())


def read_spilled(source: str, options: IntakeOptions, spill: RowSpill) -> IntakeResult | SheetRefused:
    """`read_sheet` for a csv too large to hold (`tasks.intake.streaming.streams`): read a chunk at a time
    into ``spill``, which the result's rows and table read back from (`tasks.payouts.spill_views`)."""
    try:
        streamed = stream_csv(source, spill, options)
    except IntakeError as exc:
        return SheetRefused(str(exc), exc.errors())
    return IntakeResult(
        source=streamed.source,
        sheet=None,
        content_sha256=streamed.content_sha256,
        rows=SpilledRows(spill),  # type: ignore[arg-type]  # a Sequence read a chunk at a time
        errors=list(spill.issues("error")),
        warnings=list(spill.issues("warning")),
        rows_total=streamed.rows_total,
        columns=streamed.columns,
        table=SpilledTable(spill, streamed.columns),
        mapped=streamed.mapped,
        ignored=streamed.ignored,
        currency=streamed.currency,
        currency_header=streamed.currency_header,
    )


def validation_report(intake: IntakeResult, report_dir: str, label: str) -> dict[str, str]:
    """Write LABEL-validation.xlsx; the summary's ``report_files``."""
    path = report_paths(report_dir, label)["validation"]
    return {"validation": write_validation_report(intake, path)}


def check_sheet(
    source: str,
    report_dir: str,
    label: str | None = None,
    options: IntakeOptions | None = None,
    on_invalid_rows: InvalidRows = "refuse",
    stream_over_bytes: int | None = None,
    *,
    engine: Engine | None = None,
    paid_before_days: int = 0,
) -> SheetCheckSummary:
    """`payops check`: the flow's intake without the flow. Outcome ``invalid_input`` or ``valid``. A csv
    larger than ``stream_over_bytes`` (`PayopsSettings.stream_csv_over_bytes`) is read as the flow reads it:
    a chunk at a time, into a spill file deleted afterwards. With the payops database (``engine``), the runs
    that paid the sheet or its rows in the last ``paid_before_days`` are named (``paid_before``, with
    ``paid_twice_rows``: the rows paying would pay a second time; `tasks.payouts.paid_before`)."""
    with ExitStack() as held:
        summary, intake = _check(source, report_dir, label, options, on_invalid_rows, stream_over_bytes, held)
        if engine is not None and intake is not None:
            options = options or IntakeOptions()
            paid = _paid_before(engine, intake, str(summary.label), options, paid_before_days)
            said = paid.sheet_rows
            summary.paid_before = [
                EarlierRun.model_validate({**e.as_json(), "said": e.sentence(said)}) for e in paid.earlier
            ]
            if paid.unread:
                summary.note(f"paid before: {paid.lines()[0]}")
            summary.paid_twice_rows = len(paid.second_rows) if paid.second_payment else 0
        return summary


def _paid_before(
    engine: Engine, intake: IntakeResult, label: str, options: IntakeOptions, days: int
) -> PaidBefore:
    from payops.store.reconciliation import ReconciliationStore
    from payops.store.retries import RetryRows

    sheet = sheet_fingerprint(intake, options.column_map, options.default_currency)
    try:
        return paid_before(
            ReconciliationStore(engine),
            intake.rows,
            label,
            sheet,
            days,
            retried=RetryRows(engine).ancestors(label),
        )
    except SQLAlchemyError as exc:
        return PaidBefore(label, 0, unread=f"the payops database could not be read ({type(exc).__name__})")


def _check(
    source: str,
    report_dir: str,
    label: str | None,
    options: IntakeOptions | None,
    on_invalid_rows: InvalidRows,
    stream_over_bytes: int | None,
    held: ExitStack,
) -> tuple[SheetCheckSummary, IntakeResult | None]:
    meter = RunMeter()
    if label:
        ensure_reports_spare_source(report_dir, label, source)
    if stream_over_bytes is not None and streams(source, stream_over_bytes):
        work = Path(held.enter_context(tempfile.TemporaryDirectory(prefix="payops-check-")))
        spill = held.enter_context(RowSpill(work / "rows.sqlite3"))
        intake = read_spilled(source, options or IntakeOptions(), spill)
    else:
        intake = read_sheet(source, options or IntakeOptions())
    if isinstance(intake, SheetRefused):
        summary = refusal_summary(source, label, intake.errors, SheetCheckSummary)
        read = None
    else:
        read = intake
        options = options or IntakeOptions()
        name = run_label(label, intake, options.column_map, options.default_currency)
        ensure_reports_spare_source(report_dir, name, source)
        summary = intake_summary(source, name, intake, options.column_map, SheetCheckSummary)
        summary.outcome = Outcome.INVALID_INPUT if refuses(intake, on_invalid_rows) else Outcome.VALID
        summary.report_files = validation_report(intake, report_dir, name)
    summary.duration_s = meter.elapsed
    return summary, read
