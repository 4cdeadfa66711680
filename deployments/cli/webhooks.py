"""`payops webhooks status`: the webhook inbox's backlog, oldest unforwarded delivery and failures."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime

import typer

from deployments.cli._common import fail

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
    from sqlalchemy.exc import SQLAlchemyError

    from store import migrate, open_engine
    from store.webhook_inbox import WebhookInbox

    try:
        engine = open_engine(database_url)
    except (SQLAlchemyError, ValueError) as exc:
        fail(f"--database-url: {type(exc).__name__}: {str(exc)[:200]}")
    try:
        migrate(engine)
        figures = WebhookInbox(engine).status()
    except SQLAlchemyError as exc:
        fail(f"the payops database did not answer ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")
    finally:
        engine.dispose()
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
