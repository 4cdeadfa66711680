"""`payops events sync`: emit the Payments Service events the webhooks missed."""

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

app = typer.Typer(no_args_is_help=True, help="Payments Service events: catch up with missed webhooks.")


def human_summary(s: dict[str, Any]) -> str:
    """The few lines an operator reads at the end of a catch-up."""
    lines = [f"{s.get('label') or 'events catch-up'}: {s.get('outcome')}"]
    lines.append(
        f"  read {s['events_read']}, emitted {s['events_emitted']}, duplicates skipped "
        f"{s['duplicates_skipped']}; cursor {s['cursor_before']} -> {s['cursor_after']}"
    )
    if s.get("restarted_without_cursor"):
        lines.append("  the saved cursor was too old or unknown: restarted from the first event")
    return "\n".join(lines + closing_lines(s))


@app.command("sync")
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
        fail(validation_message(exc), EXIT_INVALID)
    run_summary_flow(
        lambda: events_catch_up(params),
        json_out,
        human_summary,
        "run it again; processed events are not emitted twice",
    )
