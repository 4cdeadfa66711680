"""`payops utilities`: airtime and data purchases from a sheet.

Exit codes: 0 completed (failed purchases are a result, not an error), 2 invalid input and nothing bought,
1 anything else. Operators get one clear line, never a traceback.
"""

from __future__ import annotations

from typing import Any

import typer

from deployments.cli._common import (
    EXIT_INVALID,
    closing_lines,
    fail,
    quiet_prefect,
    run_summary_flow,
    validation_message,
)


def human_summary(s: dict[str, Any]) -> str:
    """The few lines an operator reads at the end of a purchase run."""
    lines = [f"{s.get('label')}: {s.get('outcome')}"]
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
    return "\n".join(lines + closing_lines(s))


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
        fail(validation_message(exc), EXIT_INVALID)
    run_summary_flow(
        lambda: utility_purchases(params),
        json_out,
        human_summary,
        "re-run with the same label to finish; nothing is bought twice",
    )
