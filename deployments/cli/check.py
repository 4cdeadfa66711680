"""`payops check`: the payout intake (rules, located errors, validation report, exit codes), no Prefect."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import typer
from payops.deployments.cli._common import (
    COLUMN,
    CURRENCY,
    EXIT_INVALID,
    REPORTS_DEFAULT,
    cli_settings,
    column_map,
    default_report_dir,
    fail,
    sheet_currency,
)

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings
    from sqlalchemy import Engine


def check(
    file: str = typer.Argument(..., help="Payout sheet: .xlsx/.xlsm/.csv path or fsspec URL"),
    label: str | None = typer.Option(None, help="Run label (default: fingerprint of the sheet's content)"),
    report_dir: str | None = typer.Option(None, help=f"Where LABEL-validation.xlsx goes ({REPORTS_DEFAULT})"),
    column: list[str] | None = COLUMN,
    currency: str | None = CURRENCY,
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Check a payout sheet as `payops payouts` would, at once; nothing is started or sent. Exit 0 valid."""
    from payops.tasks.intake import IntakeOptions
    from payops.tasks.payouts.sheet_check import check_sheet
    from payops.tasks.reports.run_reports import ReportWouldOverwriteSource

    options = IntakeOptions(column_map=column_map(column), default_currency=sheet_currency(currency))
    settings = cli_settings()
    big = settings.stream_csv_over_bytes  # as the flow reads a large csv: in chunks
    try:
        summary = check_sheet(
            file,
            report_dir or default_report_dir(),
            label,
            options,
            stream_over_bytes=big,
            engine=_payops_database(settings),
            paid_before_days=settings.paid_before_days,
        )
    except ReportWouldOverwriteSource as exc:
        fail(str(exc), EXIT_INVALID)
    except OSError as exc:
        fail(f"could not write the validation report: {exc}")
    if json_out:
        sys.stdout.write(json.dumps(summary.as_json(), default=str) + "\n")
    else:
        typer.echo(summary.text())
    raise typer.Exit(summary.exit_code)


def _payops_database(settings: PayopsSettings) -> Engine | None:
    """This home's payops database, to name the runs that paid the sheet before; None when there is none
    yet (a SQLite file not made: nothing was paid from this home) or it cannot be opened (the check says
    so: a note on stderr)."""
    from payops.store import open_database
    from payops.store.database import sqlite_file
    from sqlalchemy.engine import make_url

    if settings.paid_before_days <= 0:
        return None
    try:
        path = sqlite_file(make_url(settings.database))
        if path is not None and not path.exists():
            return None
        return open_database(settings)
    except Exception as exc:  # noqa: BLE001 - the check itself goes on; the lookup is said to be skipped
        why = f"the payops database could not be opened ({type(exc).__name__})"
        sys.stderr.write(f"note: paid before not looked up: {why}\n")
        return None
