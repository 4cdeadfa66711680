"""`payops cache clear`: empty the lookup and quote cache (holder names, fee quotes)."""

from __future__ import annotations

import typer

from deployments.cli._common import fail

app = typer.Typer(no_args_is_help=True, help="The lookup and quote cache kept between runs.")


@app.command("clear")
def cache_clear() -> None:
    """Forget every cached holder name and fee quote: the next pre-flight asks the service again."""
    from sqlalchemy.exc import SQLAlchemyError

    from store import migrate, open_engine
    from store.cache import LookupCache

    # The error's text is not shown: SQLAlchemy's messages can carry the database URL and its password.
    hint = "check PAYOPS_DATABASE_URL (or PAYOPS_HOME for the default SQLite file)"
    try:
        engine = open_engine()
    except (SQLAlchemyError, ImportError) as exc:  # a malformed URL, a missing driver
        fail(f"cannot open the payops database ({type(exc).__name__}); {hint}")
    try:
        migrate(engine)
        removed = LookupCache(engine).clear()
    except SQLAlchemyError as exc:
        fail(f"cannot clear the lookup cache ({type(exc).__name__}); {hint}")
    finally:
        engine.dispose()
    typer.echo(f"lookup cache cleared: {removed} entr{'y' if removed == 1 else 'ies'} removed")
