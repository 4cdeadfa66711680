"""The `payops` command line: run flows locally, serve the emulator, write the template.

Exit codes of flow commands: 0 run completed (failed payouts are a result, not an error), 2 invalid input and
nothing sent, 3 not approved, 1 any other error. Operators never see a traceback: errors are one clear line.
"""

from __future__ import annotations

import logging
import os
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import typer

from deployments.cli_common import EXIT_INVALID, fail, quiet_prefect, run_summary_flow

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Payout operations on the Payments Service."
)


class _OneLine(logging.Formatter):
    """Terminal log lines without tracebacks: an operator reads one line per problem. The API log handler is
    untouched, so the full traceback stays in the flow run's logs in the Prefect UI."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def operator_logging() -> None:
    """Make every terminal log handler (Prefect's console handler included) print one line per record."""
    import prefect.main  # noqa: F401 - sets up Prefect's handlers (later setups are incremental), then wrapped

    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            stream = getattr(handler, "stream", None)
            if stream in (sys.stderr, sys.stdout) and not isinstance(handler.formatter, _OneLine):
                handler.setFormatter(_OneLine(handler.formatter))


@app.callback()
def _setup() -> None:
    """Payout operations on the Payments Service."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    operator_logging()


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


@app.command()
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


@app.command()
def sandbox(
    host: str = typer.Option("127.0.0.1", help="Address to bind"),
    port: int = typer.Option(8800, help="Port to bind"),
    env_file: Path | None = typer.Option(None, help="Also write the client settings as export lines here"),
    seed: Path | None = typer.Option(None, help="JSON file of businesses to load"),
    rate_limit: float | None = typer.Option(None, help="Requests per second per credential (default: off)"),
    fault_rate: float = typer.Option(0.0, help="Fraction of API requests answered 5xx"),
    token_ttl: int = typer.Option(300, help="Access token lifetime in seconds"),
    delivery_delay: float = typer.Option(2.0, help="Seconds for a payout to reach its final status"),
    latency_ms: int = typer.Option(0, min=0, help="Added latency per API request (a network round trip)"),
    allow_local_webhooks: bool = typer.Option(
        False, help="Allow webhook endpoints on 127.0.0.1 (local work)"
    ),
) -> None:
    """Serve the Payments Service emulator and print the settings a client needs."""
    from sandbox.cli import run_sandbox

    run_sandbox(
        host=host,
        port=port,
        env_file=env_file,
        seed=seed,
        rate_limit=rate_limit,
        fault_rate=fault_rate,
        token_ttl=token_ttl,
        delivery_delay=delivery_delay,
        latency_ms=latency_ms,
        allow_local_webhooks=allow_local_webhooks,
    )


@app.command()
def template(file: Path = typer.Argument(..., help="Where to write the .xlsx template")) -> None:
    """Write a payout sheet template with dropdowns and a text-formatted destination column."""
    from tasks.intake import write_template

    if file.suffix.lower() != ".xlsx":
        fail(f"the template is an .xlsx file; got {file.name!r}", EXIT_INVALID)
    typer.echo(f"template written: {write_template(file)}")


# More commands live in their own modules: each has `register(app: typer.Typer) -> None`, listed here.
EXTENSIONS: list[str] = [
    "deployments.cli_settlements",
    "deployments.cli_ops",
    "deployments.cli_pipelines",
    "deployments.cli_users",
]


def _register_extensions() -> None:
    import importlib

    for module in EXTENSIONS:
        importlib.import_module(module).register(app)


_register_extensions()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
