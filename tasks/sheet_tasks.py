"""Thin Prefect tasks around the spreadsheet intake (`tasks.intake`)."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tasks.intake import IntakeOptions, IntakeResult, read_payout_sheet, write_validation_report


@task(name="read-sheet")
def read_sheet_task(source: str, options: IntakeOptions) -> IntakeResult:
    """Read and validate every row of a payout sheet (one task for the whole sheet)."""
    return read_payout_sheet(source, options)


@task(name="write-validation-report")
def write_validation_report_task(result: IntakeResult, path: str) -> str:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return str(write_validation_report(result, Path(path)))
