"""Thin Prefect tasks around the plain intake step (`tasks.payouts.sheet_check`, which `payops check` calls
too)."""

from __future__ import annotations

from payops.tasks.intake import IntakeOptions, IntakeResult
from payops.tasks.payouts.sheet_check import SheetRefused, read_sheet, read_spilled, validation_report
from payops.tasks.payouts.spill import RowSpill
from prefect import task
from prefect.cache_policies import NO_CACHE

__all__ = ["SheetRefused", "read_sheet_task", "read_spilled_task", "write_validation_report_task"]


@task(cache_policy=NO_CACHE, name="read-sheet")
def read_sheet_task(source: str, options: IntakeOptions) -> IntakeResult | SheetRefused:
    """Read and validate every row of a payout sheet (one task for the whole sheet).

    A refused file (wrong type, too large, unsafe, no header...) is a result, not a task failure.
    """
    return read_sheet(source, options)


@task(cache_policy=NO_CACHE, name="read-sheet-in-chunks")
def read_spilled_task(source: str, options: IntakeOptions, spill: RowSpill) -> IntakeResult | SheetRefused:
    """Read and validate a csv too large to hold into ``spill`` (pass it as ``quote(spill)``), a chunk of
    lines at a time; its rows, table and problems are read back from it."""
    return read_spilled(source, options, spill)


@task(cache_policy=NO_CACHE, name="write-validation-report")
def write_validation_report_task(result: IntakeResult, report_dir: str, label: str) -> dict[str, str]:
    """The validation report LABEL-validation.xlsx under ``report_dir``: the summary's ``report_files``."""
    return validation_report(result, report_dir, label)
