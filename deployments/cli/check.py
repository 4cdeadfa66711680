"""`payops check`: the payout intake (rules, located errors, validation report, exit codes), no Prefect."""

from __future__ import annotations

import json
import sys

import typer
from payops.deployments.cli._common import (
    COLUMN,
    CURRENCY,
    EXIT_INVALID,
    REPORTS_DEFAULT,
    column_map,
    default_report_dir,
    fail,
    sheet_currency,
)
from payops.flows.summaries import SheetCheckSummary


def check(
    file: str = typer.Argument(..., help="Payout sheet: .xlsx/.xlsm/.csv path or fsspec URL"),
    label: str | None = typer.Option(None, help="Run label (default: fingerprint of the sheet's content)"),
    report_dir: str | None = typer.Option(None, help=f"Where LABEL-validation.xlsx goes ({REPORTS_DEFAULT})"),
    column: list[str] | None = COLUMN,
    currency: str | None = CURRENCY,
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Check a payout sheet as `payops payouts` would, at once; nothing is started or sent. Exit 0 valid."""
    from payops.store.settings import PayopsSettings
    from payops.tasks.intake import IntakeOptions
    from payops.tasks.payouts.sheet_check import check_sheet
    from payops.tasks.reports.run_reports import ReportWouldOverwriteSource

    options = IntakeOptions(column_map=column_map(column), default_currency=sheet_currency(currency))
    big = PayopsSettings.from_env().stream_csv_over_bytes  # as the flow reads a large csv: in chunks
    try:
        summary = check_sheet(file, report_dir or default_report_dir(), label, options, stream_over_bytes=big)
    except ReportWouldOverwriteSource as exc:
        fail(str(exc), EXIT_INVALID)
    except OSError as exc:
        fail(f"could not write the validation report: {exc}")
    result = SheetCheckSummary.model_validate(summary)
    if json_out:
        sys.stdout.write(json.dumps(summary, default=str) + "\n")
    else:
        typer.echo(result.text())
    raise typer.Exit(result.exit_code)
