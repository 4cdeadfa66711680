"""`payops purchases`: airtime and data purchases from a sheet (``payops utilities`` is its former name,
kept as a hidden alias so existing scripts keep working).

Exit codes: 0 completed (failed purchases are a result, not an error), 2 invalid input and nothing bought,
1 anything else. Operators get one clear line, never a traceback.
"""

from __future__ import annotations

import sys

import typer
from payops.deployments.cli._common import (
    EXIT_INVALID,
    REPORTS_DEFAULT,
    default_report_dir,
    fail,
    quiet_prefect,
    refuse_unsafe_sheet,
    run_flow,
    validation_message,
)
from payops.deployments.cli.progress_display import is_terminal, progress_display
from payops.flows.summaries import PurchaseRunSummary


def purchases(
    file: str = typer.Argument(..., help="Utility sheet: .xlsx/.xlsm/.csv path or fsspec URL"),
    label: str | None = typer.Option(None, help="Run label (default: fingerprint of the sheet's content)"),
    report_dir: str | None = typer.Option(
        None, help=f"Where LABEL.xlsx, LABEL.csv and LABEL.json go ({REPORTS_DEFAULT})"
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and quote only; buy nothing"),
    poll_deadline: float = typer.Option(600, help="Seconds to poll for final statuses"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Buy airtime and data from a sheet: validate, quote, buy once per row, poll to final, report."""
    refuse_unsafe_sheet(file, label, json_out)  # before Prefect is imported: answered at once
    with quiet_prefect(json_out, progress_shown=not json_out and is_terminal(sys.stdout)):
        from payops.flows.utility_purchases import UtilityRunParams, utility_purchases
        from pydantic import ValidationError

    try:
        params = UtilityRunParams(
            source=file,
            label=label,
            dry_run=dry_run,
            poll_deadline_s=poll_deadline,
            report_dir=report_dir or default_report_dir(),
            credentials_block=credentials_block,
        )
    except ValidationError as exc:
        fail(validation_message(exc), EXIT_INVALID)
    with progress_display(json_out):
        run_flow(
            lambda: utility_purchases(params, return_state=True),
            json_out,
            PurchaseRunSummary,
            "re-run with the same label to finish; nothing is bought twice",
        )
