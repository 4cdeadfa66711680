"""Thin Prefect tasks around the spreadsheet intake (`tasks.intake`)."""

from __future__ import annotations

from dataclasses import dataclass

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.intake import IntakeError, IntakeOptions, IntakeResult, read_payout_sheet, write_validation_report


@dataclass(frozen=True)
class SheetRefused:
    """A refused file: the message, and the summary's ``errors`` (row/column filled where it is located)."""

    message: str
    errors: list[dict[str, object]]


@task(cache_policy=NO_CACHE, name="read-sheet")
def read_sheet_task(source: str, options: IntakeOptions) -> IntakeResult | SheetRefused:
    """Read and validate every row of a payout sheet (one task for the whole sheet).

    A refused file (wrong type, too large, unsafe, no header...) is a result, not a task failure.
    """
    try:
        return read_payout_sheet(source, options)
    except IntakeError as exc:
        return SheetRefused(str(exc), exc.errors())


@task(cache_policy=NO_CACHE, name="write-validation-report")
def write_validation_report_task(result: IntakeResult, path: str) -> str:
    """The validation report at ``path`` (local path or fsspec URL)."""
    return write_validation_report(result, path)
