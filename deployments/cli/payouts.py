"""`payops payouts` and `payops template`: paying a payout sheet from the shell."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path

import typer

from deployments.cli._common import EXIT_INVALID, fail, quiet_prefect, refuse_unsafe_sheet, run_flow
from flows.summaries import PayoutRunSummary


def payouts(
    file: str = typer.Argument(..., help="Payout sheet: .xlsx/.xlsm/.csv path or fsspec URL"),
    label: str | None = typer.Option(None, help="Run label (default: fingerprint of the sheet's content)"),
    report_dir: str = typer.Option("reports", help="Where LABEL.xlsx, LABEL.csv and LABEL.json go"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and pre-flight only; send nothing"),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Send the valid rows, report the rest"),
    require_approval: bool = typer.Option(
        False, "--require-approval", help="Pause for approval before sending"
    ),
    approval_threshold: str | None = typer.Option(
        None, help="Require approval when the total is at least this"
    ),
    approval_timeout: int = typer.Option(3600, help="Seconds to wait for approval before rejecting"),
    poll_deadline: float = typer.Option(900, help="Seconds to poll for final statuses"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    no_name_check: bool = typer.Option(False, "--no-name-check", help="Skip the payee name lookups"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Pay a payout sheet: validate, pre-flight, send in batches of 100, poll to final, report."""
    refuse_unsafe_sheet(file, label, json_out)  # before Prefect is imported: answered at once
    quiet_prefect(json_out)
    try:
        threshold = Decimal(approval_threshold) if approval_threshold else None
    except InvalidOperation:
        fail(f"--approval-threshold must be a decimal amount, got {approval_threshold!r}", EXIT_INVALID)
    from flows.payouts import PayoutRunParams, payout_spreadsheet

    params = PayoutRunParams(
        source=file,
        label=label,
        dry_run=dry_run,
        on_invalid_rows="skip" if skip_invalid else "refuse",
        require_approval=require_approval,
        approval_threshold=threshold,
        approval_timeout_s=approval_timeout,
        poll_deadline_s=poll_deadline,
        report_dir=report_dir,
        credentials_block=credentials_block,
        check_names=not no_name_check,
    )
    run_flow(
        lambda: payout_spreadsheet(params),
        json_out,
        PayoutRunSummary,
        "re-run with the same label to finish; nothing is sent twice",
    )


def template(file: Path = typer.Argument(..., help="Where to write the .xlsx template")) -> None:
    """Write a payout sheet template with dropdowns and a text-formatted destination column."""
    from tasks.intake import write_template

    if file.suffix.lower() != ".xlsx":
        fail(f"the template is an .xlsx file; got {file.name!r}", EXIT_INVALID)
    typer.echo(f"template written: {write_template(file)}")
