"""`payops events sync`: emit the Payments Service events the webhooks missed."""

from __future__ import annotations

import typer
from payops.deployments.cli._common import EXIT_INVALID, fail, quiet_prefect, run_flow, validation_message
from payops.flows.summaries import EventsCatchUpSummary

app = typer.Typer(no_args_is_help=True, help="Payments Service events: catch up with missed webhooks.")


@app.command("sync")
def events_sync(
    variable: str = typer.Option("payments-events-cursor", help="Prefect Variable holding the cursor"),
    credentials_block: str | None = typer.Option(None, help="PaymentsCredentials block (default: env vars)"),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON summary on stdout"),
) -> None:
    """Emit the events the webhooks missed (GET /v1/events from the saved cursor), each once."""
    with quiet_prefect(json_out):
        from payops.flows.events import EventsCatchUpParams, events_catch_up
        from pydantic import ValidationError

    try:
        params = EventsCatchUpParams(variable=variable, credentials_block=credentials_block)
    except ValidationError as exc:
        fail(validation_message(exc), EXIT_INVALID)
    run_flow(
        lambda: events_catch_up(params, return_state=True),
        json_out,
        EventsCatchUpSummary,
        "run it again; processed events are not emitted twice",
    )
