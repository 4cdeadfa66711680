"""`payops settlements retry|settle-now`: the settlement flows from the command line.

Exit codes: 0 run completed (a retry that failed again is a result, not an error), 2 invalid option,
1 anything else: a policy alert (the message names the fix), runs still running at the poll deadline, errors.
Operators never see a traceback.
"""

from __future__ import annotations

from datetime import datetime

import typer
from payops.deployments.cli._common import (
    EXIT_INVALID,
    REPORTS_DEFAULT,
    default_report_dir,
    fail,
    parse_time,
    quiet_prefect,
    run_flow,
)
from payops.flows.summaries import SettlementRunSummary

app = typer.Typer(no_args_is_help=True, help="Settlement runs: retry failed runs once, settle now.")


def _parse_since(value: str | None) -> datetime | None:
    return parse_time("--since", value)


@app.command("retry")
def retry(
    run_id: str | None = typer.Option(None, "--run-id", help="Retry only this settlement run"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
    report_dir: str | None = typer.Option(
        None, help=f"Where the xlsx, csv and JSON reports go ({REPORTS_DEFAULT})"
    ),
    since: str | None = typer.Option(None, help="Oldest run start to look at (ISO 8601; default 7 days ago)"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    poll_deadline: float = typer.Option(300, help="Seconds to poll the new runs to completed"),
) -> None:
    """Retry each failed settlement run (failed_partial, failed_all) exactly once, then report."""
    with quiet_prefect(json_out):
        from payops.flows.settlements import SettlementRetryParams, retry_failed_settlements

    params = SettlementRetryParams(
        run_id=run_id,
        since=_parse_since(since),
        report_dir=report_dir or default_report_dir(),
        credentials_block=credentials_block,
        poll_deadline_s=poll_deadline,
    )
    run_flow(
        lambda: retry_failed_settlements(params, return_state=True),
        json_out,
        SettlementRunSummary,
        "run the command again; a retry is never started twice",
    )


@app.command("settle-now")
def settle_now(
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
    reference: str | None = typer.Option(None, help="Run reference (default: derived from the flow run)"),
    currency: str | None = typer.Option(None, help="Currency to settle (default: the policy's)"),
    report_dir: str | None = typer.Option(
        None, help=f"Where the xlsx, csv and JSON reports go ({REPORTS_DEFAULT})"
    ),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    poll_deadline: float = typer.Option(300, help="Seconds to poll the run to completed"),
) -> None:
    """Settle the wallet now (on demand), poll the run to completed, report."""
    with quiet_prefect(json_out):
        from payops.flows.settlements import SettleNowParams
        from payops.flows.settlements import settle_now as settle_now_flow
        from pydantic import ValidationError

    try:
        params = SettleNowParams(
            reference=reference,
            currency=currency,
            report_dir=report_dir or default_report_dir(),
            credentials_block=credentials_block,
            poll_deadline_s=poll_deadline,
        )
    except ValidationError as exc:
        fail("; ".join(f"--{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()), EXIT_INVALID)
    run_flow(
        lambda: settle_now_flow(params, return_state=True),
        json_out,
        SettlementRunSummary,
        "run the command again; a retry is never started twice",
    )
