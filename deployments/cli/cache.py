"""`payops cache clear`: empty the lookup and quote cache (holder names, fee quotes)."""

from __future__ import annotations

import typer
from payops.deployments.cli._common import payops_database

app = typer.Typer(no_args_is_help=True, help="The lookup and quote cache kept between runs.")


@app.command("clear")
def cache_clear() -> None:
    """Forget every cached holder name and fee quote: the next pre-flight asks the service again."""
    from payops.store.cache import LookupCache

    with payops_database() as engine:
        removed = LookupCache(engine).clear()
    typer.echo(f"lookup cache cleared: {removed} entr{'y' if removed == 1 else 'ies'} removed")
