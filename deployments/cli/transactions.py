"""`payops transactions report`: a window of the unified transaction list, summed."""

from __future__ import annotations

import typer
from payops.deployments.cli._common import (
    EXIT_INVALID,
    REPORTS_DEFAULT,
    default_report_dir,
    fail,
    parse_time,
    quiet_prefect,
    run_flow,
    validation_message,
)
from payops.flows.summaries import TransactionsReportSummary

app = typer.Typer(no_args_is_help=True, help="Transactions: reports of the unified list.")


@app.command("report")
def transactions_report(
    from_: str | None = typer.Option(
        None, "--from", help="Created at or after (ISO; default: yesterday, Accra)"
    ),
    to: str | None = typer.Option(
        None, "--to", help="Created before (ISO; default: end of yesterday, Accra)"
    ),
    kind: str | None = typer.Option(None, help="collection, payout, settlement, utility, wallet_transfer"),
    status: str | None = typer.Option(None, help="Only this status"),
    settlement_status: str | None = typer.Option(None, help="not_eligible, eligible, claimed, settled"),
    reconciliation_status: str | None = typer.Option(None, help="unchecked, matched, mismatched"),
    report_dir: str | None = typer.Option(
        None, help=f"Where the xlsx, csv and JSON reports go ({REPORTS_DEFAULT})"
    ),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Report a window of transactions with sums by kind, direction, status and reconciliation."""
    with quiet_prefect(json_out):
        from payops.flows.transactions import TransactionsReportParams
        from payops.flows.transactions import transactions_report as report_flow
        from pydantic import ValidationError

    try:
        params = TransactionsReportParams.model_validate(
            {
                "from": parse_time("--from", from_),
                "to": parse_time("--to", to),
                "kind": kind,
                "status": status,
                "settlement_status": settlement_status,
                "reconciliation_status": reconciliation_status,
                "report_dir": report_dir or default_report_dir(),
                "credentials_block": credentials_block,
            }
        )
    except ValidationError as exc:
        fail(validation_message(exc), EXIT_INVALID)
    run_flow(
        lambda: report_flow(params, return_state=True),
        json_out,
        TransactionsReportSummary,
        "run it again; the report only reads",
    )
