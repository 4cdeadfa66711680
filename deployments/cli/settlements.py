"""`payops settlements retry|settle-now`: the settlement flows from the command line.

Exit codes: 0 run completed (a retry that failed again is a result, not an error), 2 invalid option,
1 anything else: a policy alert (the message names the fix), runs still running at the poll deadline, errors.
Operators never see a traceback.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import typer

from deployments.cli._common import EXIT_ERROR, EXIT_INVALID, EXIT_OK, fail, parse_time, quiet_prefect

app = typer.Typer(no_args_is_help=True, help="Settlement runs: retry failed runs once, settle now.")


def _parse_since(value: str | None) -> datetime | None:
    return parse_time("--since", value)


def human_summary(s: dict[str, Any]) -> str:
    """The short summary an operator reads at the end of a settlement command."""
    lines = [f"{s.get('label')}: {s.get('outcome')}"]
    if "runs_seen" in s:
        lines.append(
            f"  runs seen: {s['runs_seen']}   failed: {s['failed_runs']}   retried now: {s['retried']}   "
            f"retried before: {s['retried_before']}   skipped: {s['skipped']}"
        )
        if s.get("retry_outcomes"):
            lines.append("  retry outcomes: " + ", ".join(f"{k} {v}" for k, v in s["retry_outcomes"].items()))
        for run_id in s.get("retries_failed_again", []):
            lines.append(f"  retry run {run_id} failed again: reported, not retried again")
        for run_id, reason in (s.get("skipped_reasons") or {}).items():
            lines.append(f"  skipped {run_id}: {reason}")
    if s.get("run_id") and "settlement_outcome" in s:
        lines.append(
            f"  run {s['run_id']}: {s['status']} {s.get('settlement_outcome') or ''}  "
            f"total {s['total']} {s['currency']}"
        )
    if s.get("outcome") == "incomplete":
        lines.append(
            "  some runs were still running at the poll deadline: run the command again to report them"
        )
    for note in s.get("notes", []):
        lines.append(f"  note: {note}")
    for kind, path in (s.get("report_files") or {}).items():
        lines.append(f"  report {kind}: {path}")
    return "\n".join(lines)


def _run_flow(call: Callable[[], Any], json_out: bool) -> None:
    """Run a flow that may return a Failed state; print the summary; exit with the outcome's code."""
    try:
        state = asyncio.run(call())
        data = state.result(raise_on_failure=False)
    except KeyboardInterrupt:
        fail("interrupted: run the command again; a retry is never started twice")
    except Exception as exc:  # noqa: BLE001 - operators get one clear line, never a traceback
        fail(f"{type(exc).__name__}: {exc}")
    summary = data if isinstance(data, dict) else None
    if summary is not None:
        if json_out:
            sys.stdout.write(json.dumps(summary, default=str) + "\n")
        else:
            typer.echo(human_summary(summary))
    if state.is_failed():
        detail = state.message or (
            f"{type(data).__name__}: {data}" if isinstance(data, BaseException) else ""
        )
        fail(detail or "the flow run failed")
    raise typer.Exit(EXIT_OK if summary and summary.get("outcome") == "completed" else EXIT_ERROR)


@app.command("retry")
def retry(
    run_id: str | None = typer.Option(None, "--run-id", help="Retry only this settlement run"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
    report_dir: str = typer.Option("reports", help="Where the xlsx, csv and JSON reports go"),
    since: str | None = typer.Option(None, help="Oldest run start to look at (ISO 8601; default 7 days ago)"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    poll_deadline: float = typer.Option(300, help="Seconds to poll the new runs to completed"),
) -> None:
    """Retry each failed settlement run (failed_partial, failed_all) exactly once, then report."""
    quiet_prefect(json_out)
    from flows.settlements import SettlementRetryParams, retry_failed_settlements

    params = SettlementRetryParams(
        run_id=run_id,
        since=_parse_since(since),
        report_dir=report_dir,
        credentials_block=credentials_block,
        poll_deadline_s=poll_deadline,
    )
    _run_flow(lambda: retry_failed_settlements(params, return_state=True), json_out)


@app.command("settle-now")
def settle_now(
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
    reference: str | None = typer.Option(None, help="Run reference (default: derived from the flow run)"),
    currency: str | None = typer.Option(None, help="Currency to settle (default: the policy's)"),
    report_dir: str = typer.Option("reports", help="Where the xlsx, csv and JSON reports go"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    poll_deadline: float = typer.Option(300, help="Seconds to poll the run to completed"),
) -> None:
    """Settle the wallet now (on demand), poll the run to completed, report."""
    quiet_prefect(json_out)
    from pydantic import ValidationError

    from flows.settlements import SettleNowParams
    from flows.settlements import settle_now as settle_now_flow

    try:
        params = SettleNowParams(
            reference=reference,
            currency=currency,
            report_dir=report_dir,
            credentials_block=credentials_block,
            poll_deadline_s=poll_deadline,
        )
    except ValidationError as exc:
        fail("; ".join(f"--{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()), EXIT_INVALID)
    _run_flow(lambda: settle_now_flow(params, return_state=True), json_out)
