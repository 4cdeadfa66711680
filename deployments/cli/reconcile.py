"""`payops reconcile`: the daily close (`--date D`), one run (`--run LABEL`), and `history`."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import typer
from payops.deployments.cli._common import (
    EXIT_INVALID,
    REPORTS_DEFAULT,
    cli_settings,
    default_report_dir,
    fail,
    payops_database,
    quiet_prefect,
    run_flow,
    validation_message,
)
from payops.deployments.cli.front_door import ask, front_door
from payops.deployments.cli.remote_runs import follow
from payops.flows.summaries import ReconciliationSummary

app = typer.Typer(
    invoke_without_command=True,
    help="Reconciliation: the daily close of the wallet, a run against the service's ledger, their history.",
)


@app.callback()
def reconcile(
    ctx: typer.Context,
    day: str | None = typer.Option(
        None, "--date", help="Close this business day (YYYY-MM-DD, Africa/Accra; default: the day just ended)"
    ),
    run: str | None = typer.Option(
        None, "--run", help="Reconcile this payout run (its name, label or id, as `payops runs` shows it)"
    ),
    unchecked_after_hours: float = typer.Option(
        24, help="A final transaction the platform has not checked after this many hours is a difference"
    ),
    report_dir: str | None = typer.Option(None, help=f"Where the close's reports go ({REPORTS_DEFAULT})"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Close a day (wallet snapshot, movements, attribution) or reconcile one run; `history` lists checks."""
    if ctx.invoked_subcommand is not None:
        return
    if day and run:
        fail("give --date or --run, not both", EXIT_INVALID)
    if day is not None:
        try:
            date.fromisoformat(day)
        except ValueError:
            fail(f"--date: {day!r} is not a date; use YYYY-MM-DD", EXIT_INVALID)
    with front_door(cli_settings()) as door:
        if door is not None:
            _only_on_this_host(report_dir, credentials_block)
            body = {"run": run, "date": day, "unchecked_after_hours": unchecked_after_hours, "channel": "cli"}
            started = ask(door, "POST", "/reconcile", json=body)
            follow(door, started["id"], json_out=json_out, kind=ReconciliationSummary)
    with quiet_prefect(json_out):
        from payops.flows.reconcile import (
            ReconcileDayParams,
            ReconcileRunParams,
            reconcile_day,
        )
        from pydantic import ValidationError

    try:
        if run is not None:
            run_params = ReconcileRunParams(
                label=run,
                unchecked_after_hours=unchecked_after_hours,
                credentials_block=credentials_block,
                trigger="cli",
            )
        else:
            day_params = ReconcileDayParams.model_validate(
                {
                    "date": day,
                    "unchecked_after_hours": unchecked_after_hours,
                    "report_dir": report_dir or default_report_dir(),
                    "credentials_block": credentials_block,
                    "trigger": "cli",
                }
            )
    except ValidationError as exc:
        fail(validation_message(exc), EXIT_INVALID)
    if run is not None:
        call = lambda: _reconcile_named(run_params)  # noqa: E731
    else:
        call = lambda: reconcile_day(day_params, return_state=True)  # noqa: E731
    run_flow(call, json_out, ReconciliationSummary, "run it again; reconciliation only reads the service")


async def _reconcile_named(params: Any) -> Any:
    """Reconcile the run the operator named as `payops runs` shows it (name, label or id): by its label."""
    from payops.deployments.run_history import payout_label
    from payops.flows.reconcile import reconcile_run

    named = params.model_copy(update={"label": await payout_label(params.label)})
    return await reconcile_run(named, return_state=True)


def _only_on_this_host(report_dir: str | None, credentials_block: str | None) -> None:
    """Options that name a place on this host mean nothing to the server: refused in one line."""
    if report_dir or credentials_block:
        fail(
            "--report-dir and --credentials-block are for a reconciliation on this host without a payops "
            "server: through the server its workers hold the credential and its reports stay on the server",
            EXIT_INVALID,
        )


@app.command("history")
def history(
    run: str | None = typer.Option(None, "--run", help="Only this payout run's checks"),
    day: str | None = typer.Option(None, "--date", help="Only this day's closes (YYYY-MM-DD)"),
    limit: int = typer.Option(20, min=1, max=1000, help="Newest checks shown"),
    json_out: bool = typer.Option(False, "--json", help="Print the checks as JSON"),
) -> None:
    """Checks of runs and closes from the payops database, newest first, with their differences (through
    the payops server when there is one)."""
    with front_door(cli_settings()) as door:
        if door is not None:
            query = {k: v for k, v in {"run": run, "date": day, "limit": limit}.items() if v is not None}
            rows = ask(door, "GET", "/reconciliation", params=query)
        else:
            rows = _history_here(run, day, limit)
    if json_out:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        typer.echo("no reconciliation yet (runs reconcile when they end; `payops reconcile` closes a day)")
        return
    for c in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in (c["summary"].get("by_kind") or {}).items())
        at = c["checked_at"][:19].replace("T", " ")
        typer.echo(
            f"{at} UTC  {c['scope']:3}  {c['key']:30}  {c['status']:11}  {c['trigger']:9}"
            + (f"  {kinds}" if kinds else "")
        )
        for cur, snap in c["snapshot"].items():
            typer.echo(f"    {cur}: balance {snap['balance']}, reserved {snap['reserved']}")


def _history_here(run: str | None, day: str | None, limit: int) -> list[dict[str, Any]]:
    """The checks in this host's payops database, as the server's API gives them."""
    from payops.store.reconciliation import ReconciliationStore

    scope, key = ("run", run) if run else (("day", day) if day else (None, None))
    with payops_database() as engine:
        return [c.as_json() for c in ReconciliationStore(engine).checks(scope, key, limit)]
