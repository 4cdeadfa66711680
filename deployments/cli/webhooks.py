"""`payops webhooks status`: the webhook inbox's backlog, oldest unforwarded delivery and failures."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime

import typer
from payops.deployments.cli._common import DATABASE_SETTING, cli_settings, payops_database

app = typer.Typer(no_args_is_help=True, help="Webhooks: the durable inbox and its relay to Prefect.")


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    moment = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")
    return f"{moment} ({time.time() - epoch:,.0f} s ago)"


@app.command("status")
def status(
    database_url: str | None = typer.Option(
        None, help="payops database (default: PAYOPS_DATABASE_URL, else SQLite under PAYOPS_HOME)"
    ),
    json_out: bool = typer.Option(False, "--json", help="Print only the JSON figures on stdout"),
) -> None:
    """Backlog (selected, not yet in Prefect), the oldest unforwarded delivery, and failing forwards."""
    from payops.store.webhook_inbox import WebhookInbox

    settings = cli_settings()
    if database_url:
        settings = settings.model_copy(update={"database_url": database_url})
    setting = "--database-url" if database_url else DATABASE_SETTING
    with payops_database(settings, setting=setting) as engine:
        figures = WebhookInbox(engine).status()
    if json_out:
        sys.stdout.write(json.dumps(asdict(figures)) + "\n")
        return
    typer.echo(f"webhook inbox: {figures.total} kept ({figures.kept_only} for audit only)")
    typer.echo(f"  forwarded to Prefect: {figures.forwarded}")
    typer.echo(f"  backlog (not yet in Prefect): {figures.backlog}")
    typer.echo(f"  oldest unforwarded: {_when(figures.oldest_unforwarded_at)}")
    typer.echo(f"  failing (retrying with backoff): {figures.failing}")
    if figures.last_error:
        typer.echo(f"  last error: {figures.last_error}")
