"""`payops db`: the payops database's schema, where it is, and bringing it up to date.

Only `payops db upgrade` and `payops serve` migrate a database; every other command refuses one that is behind
(exit 2, one line naming the database and this command). A new home's empty database is created at the newest
revision by whichever command opens it first: there is nothing to migrate.
"""

from __future__ import annotations

import typer
from payops.deployments.cli._common import DATABASE_SETTING, EXIT_INVALID, cli_settings, fail

app = typer.Typer(no_args_is_help=True, help="The payops database: its schema revision, and upgrading it.")


@app.command("current")
def current() -> None:
    """Where the payops database is (password masked), the revision it records and the one this payops needs;
    exit 2 when it is behind."""
    from payops.store import shown_url
    from payops.store.database import SCHEMA_HEADS, UPGRADE_COMMAND, open_engine, recorded_revisions
    from sqlalchemy.exc import SQLAlchemyError

    settings = cli_settings()
    url = settings.database
    try:
        engine = open_engine(url)  # only read: a brand-new database is not created by looking at it
        try:
            recorded = recorded_revisions(engine)
        finally:
            engine.dispose()
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        fail(f"cannot open the payops database ({type(exc).__name__}); check {DATABASE_SETTING}")
    typer.echo(f"database: {shown_url(url)}")
    typer.echo(f"revision: {', '.join(sorted(recorded)) or 'none (empty)'}")
    typer.echo(f"needed:   {', '.join(sorted(SCHEMA_HEADS))}")
    if recorded != SCHEMA_HEADS:
        typer.echo(f"behind: run `{UPGRADE_COMMAND}`" if recorded else "empty: created on first use")
        if recorded:
            raise typer.Exit(EXIT_INVALID)


@app.command("upgrade")
def upgrade() -> None:
    """Bring the payops database's schema to the newest revision (safe to run again: nothing to do then). A
    host command: it needs write access to the payops home and is audited as host:<uid>."""
    from payops.deployments.cli.host import audit_locally, writable_home
    from payops.store import shown_url, upgrade_database
    from payops.store.database import SCHEMA_HEADS
    from payops.store.home import host_actor
    from sqlalchemy.exc import SQLAlchemyError

    writable_home()
    settings = cli_settings()
    try:
        upgrade_database(settings)
    except (SQLAlchemyError, ImportError, ValueError, OSError) as exc:
        fail(f"the payops database was not upgraded ({type(exc).__name__}); check {DATABASE_SETTING}")
    audit_locally("db.upgraded", "db:payops", revision=", ".join(sorted(SCHEMA_HEADS)))
    at = ", ".join(sorted(SCHEMA_HEADS))
    typer.echo(f"{shown_url(settings.database)}: at {at} (locally, audited as {host_actor()})")
