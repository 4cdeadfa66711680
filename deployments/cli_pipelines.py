"""`payops utilities`, `payops events sync`, `payops transactions report`: the issue-10 flows from the shell.

Exit codes: 0 completed (failed purchases are a result, not an error), 2 invalid input and nothing sent,
1 anything else. Operators get one clear line, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from deployments.cli_common import (
    EXIT_INVALID,
    fail,
    parse_time,
    quiet_prefect,
    refuse_unsafe_sheet,
    run_summary_flow,
)


def _validation_message(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in errors())
    return str(exc)


def human_summary(s: dict[str, Any]) -> str:
    """The few lines an operator reads at the end of a command."""
    lines = [f"{s.get('label') or 'events catch-up'}: {s.get('outcome')}"]
    if "rows_total" in s:
        lines.append(f"  rows: {s['rows_total']} ({s['rows_valid']} valid, {s['rows_invalid']} invalid)")
        lines.append(
            f"  amount: {s.get('amount_total')}   fees: {s.get('fee_total', '-')}   "
            f"gross: {s.get('gross_total', '-')}"
        )
        if s.get("purchases_by_status"):
            lines.append("  purchases: " + ", ".join(f"{k} {v}" for k, v in s["purchases_by_status"].items()))
        if s.get("refused_items"):
            lines.append(f"  refused by the service: {s['refused_items']} {s.get('refused_by_code', {})}")
        if s.get("replayed_purchases"):
            lines.append(f"  bought by an earlier run with this label (replayed): {s['replayed_purchases']}")
        for ref in s.get("unresolved", []):
            lines.append(f"  awaiting the service (do not buy again): {ref}")
        for e in s.get("errors", [])[:20]:
            lines.append(f"  row {e['row']}, column {e['column']}: {e['message']}")
        if len(s.get("errors", [])) > 20:
            lines.append(f"  ... and {len(s['errors']) - 20} more errors (see the validation report)")
    if "events_read" in s:
        lines.append(
            f"  read {s['events_read']}, emitted {s['events_emitted']}, duplicates skipped "
            f"{s['duplicates_skipped']}; cursor {s['cursor_before']} -> {s['cursor_after']}"
        )
        if s.get("restarted_without_cursor"):
            lines.append("  the saved cursor was too old or unknown: restarted from the first event")
    if "transactions" in s:
        lines.append(f"  window {s['from']} -> {s['to']}: {s['transactions']} transactions")
        for key, cur in s.get("totals_by_kind_direction", {}).items():
            lines.append(f"  {key}: " + ", ".join(f"{v} {c}" for c, v in cur.items()))
        if s.get("mismatched"):
            lines.append(f"  mismatched reconciliations: {len(s['mismatched'])}")
    for note in s.get("notes", []):
        lines.append(f"  note: {note}")
    for kind, path in (s.get("report_files") or {}).items():
        lines.append(f"  report {kind}: {path}")
    return "\n".join(lines)


def _run(call: Callable[[], Any], json_out: bool, interrupted: str) -> None:
    run_summary_flow(call, json_out, human_summary, interrupted)


def utilities(
    file: str = typer.Argument(..., help="Utility sheet: .xlsx/.xlsm/.csv path or fsspec URL"),
    label: str | None = typer.Option(None, help="Run label (default: fingerprint of the sheet's content)"),
    report_dir: str = typer.Option("reports", help="Where LABEL.xlsx, LABEL.csv and LABEL.json go"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and quote only; buy nothing"),
    poll_deadline: float = typer.Option(600, help="Seconds to poll for final statuses"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Buy airtime and data from a sheet: validate, quote, buy once per row, poll to final, report."""
    quiet_prefect(json_out)
    refuse_unsafe_sheet(file)
    from pydantic import ValidationError

    from flows.utilities import UtilityRunParams, utility_purchases

    try:
        params = UtilityRunParams(
            source=file,
            label=label,
            dry_run=dry_run,
            poll_deadline_s=poll_deadline,
            report_dir=report_dir,
            credentials_block=credentials_block,
        )
    except ValidationError as exc:
        fail(_validation_message(exc), EXIT_INVALID)
    _run(
        lambda: utility_purchases(params),
        json_out,
        "re-run with the same label to finish; nothing is bought twice",
    )


def events_sync(
    variable: str = typer.Option("payments-events-cursor", help="Prefect Variable holding the cursor"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Emit the events the webhooks missed (GET /v1/events from the saved cursor), each once."""
    quiet_prefect(json_out)
    from pydantic import ValidationError

    from flows.events import EventsCatchUpParams, events_catch_up

    try:
        params = EventsCatchUpParams(variable=variable, credentials_block=credentials_block)
    except ValidationError as exc:
        fail(_validation_message(exc), EXIT_INVALID)
    _run(lambda: events_catch_up(params), json_out, "run it again; processed events are not emitted twice")


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
    report_dir: str = typer.Option("reports", help="Where the xlsx, csv and JSON reports go"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Report a window of transactions with sums by kind, direction, status and reconciliation."""
    quiet_prefect(json_out)
    from pydantic import ValidationError

    from flows.transactions import TransactionsReportParams
    from flows.transactions import transactions_report as report_flow

    try:
        params = TransactionsReportParams.model_validate(
            {
                "from": parse_time("--from", from_),
                "to": parse_time("--to", to),
                "kind": kind,
                "status": status,
                "settlement_status": settlement_status,
                "reconciliation_status": reconciliation_status,
                "report_dir": report_dir,
                "credentials_block": credentials_block,
            }
        )
    except ValidationError as exc:
        fail(_validation_message(exc), EXIT_INVALID)
    _run(lambda: report_flow(params), json_out, "run it again; the report only reads")


def register(app: typer.Typer) -> None:
    """Add `utilities`, `events sync` and `transactions report` to the payops CLI."""
    app.command("utilities")(utilities)
    events = typer.Typer(no_args_is_help=True, help="Payments Service events: catch up with missed webhooks.")
    events.command("sync")(events_sync)
    app.add_typer(events, name="events")
    transactions = typer.Typer(no_args_is_help=True, help="Transactions: reports of the unified list.")
    transactions.command("report")(transactions_report)
    app.add_typer(transactions, name="transactions")
