"""`payops payouts`, `payops template`, `payops approve`: paying a payout sheet from the shell."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import typer

from deployments.cli._common import EXIT_INVALID, fail, quiet_prefect, run_summary_flow


def human_summary(s: dict[str, Any]) -> str:
    """The short summary an operator reads at the end of a run."""
    lines = [
        f"run {s['label'] or s.get('source')}: {s['outcome']}",
        f"  rows: {s['rows_total']} ({s['rows_valid']} valid, {s['rows_invalid']} invalid)   "
        f"batches: {s.get('batches', 0)}",
    ]
    if s.get("payouts_by_status"):
        lines.append("  payouts: " + ", ".join(f"{k} {v}" for k, v in s["payouts_by_status"].items()))
    if s.get("refused_items"):
        lines.append(f"  refused by the service: {s['refused_items']} {s.get('refused_by_code', {})}")
    if s.get("replayed_payouts"):
        lines.append(f"  already sent by an earlier run with this label (replayed): {s['replayed_payouts']}")
    if s.get("awaiting_review"):
        lines.append(f"  awaiting review (in_review/held): {len(s['awaiting_review'])}")
    if s.get("not_final") and s.get("deadline_reached"):
        lines.append(f"  not final at the poll deadline: {len(s['not_final'])}")
    lines.append(
        f"  amount: {s['amount_total']}   fees: {s.get('fee_total', '0.00')}   "
        f"time: {s.get('duration_s', 0)}s"
    )
    for e in s.get("errors", [])[:20]:
        where = f"row {e['row']}, column {e['column']}" if e.get("row") is not None else "file"
        lines.append(f"  {where}: {e['message']}")
    if len(s.get("errors", [])) > 20:
        lines.append(f"  ... and {len(s['errors']) - 20} more errors (see the validation report)")
    preflight = s.get("preflight") or {}
    for p in preflight.get("problems", []) + preflight.get("notes", []):
        lines.append(f"  pre-flight: {p}")
    for kind, path in (s.get("report_files") or {}).items():
        lines.append(f"  report {kind}: {path}")
    return "\n".join(lines)


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
    run_summary_flow(
        lambda: payout_spreadsheet(params),
        json_out,
        human_summary,
        "re-run with the same label to finish; nothing is sent twice",
    )


def template(file: Path = typer.Argument(..., help="Where to write the .xlsx template")) -> None:
    """Write a payout sheet template with dropdowns and a text-formatted destination column."""
    from tasks.intake import write_template

    if file.suffix.lower() != ".xlsx":
        fail(f"the template is an .xlsx file; got {file.name!r}", EXIT_INVALID)
    typer.echo(f"template written: {write_template(file)}")
