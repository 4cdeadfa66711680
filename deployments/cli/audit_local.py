"""The audit trail read on the server host itself, when no payops server runs (`payops audit verify|list`
without a server): the host holds the database and the audit key. With a `payops serve` of this home running,
its Prefect server (and its login) is found through the home's record, so each entry is also compared with
its Prefect event."""

from __future__ import annotations

import asyncio
from typing import Any

import typer
from payops.deployments.cli._common import EXIT_ERROR, cli_settings, payops_database


def verify_locally() -> None:
    """`payops audit verify` on this host: the chain with the home's key, and the Prefect copies when a
    Prefect API is configured."""
    from payops.store.audit import chain_id, verify
    from payops.tasks.events.auditing import event_copies
    from prefect.settings import PREFECT_API_URL

    settings = cli_settings()
    key = settings.audit_key_bytes()
    copies = None
    if PREFECT_API_URL.value():
        try:
            copies = asyncio.run(event_copies(chain_id(key)))
        except Exception as exc:  # noqa: BLE001 - the chain is still checked; say why the copies were not
            typer.echo(
                f"Prefect events not compared ({type(exc).__name__}): only the chain is checked", err=True
            )
    with payops_database(settings) as engine:
        verdict = verify(engine, copies, key=key)
    if verdict.ok:
        compared = f"; {len(set(copies))} compared with their Prefect events" if copies is not None else ""
        typer.echo(f"audit trail intact: {verdict.entries} entries{compared}")
        return
    for problem in verdict.problems:
        typer.echo(f"audit trail broken: {problem}", err=True)
    raise typer.Exit(EXIT_ERROR)


def entries_locally(actor: str | None, action: str | None, limit: int) -> list[dict[str, Any]]:
    """The newest entries of this host's audit trail, as the API answers them."""
    from payops.store.audit import search

    with payops_database() as engine:
        found = search(engine, actor=actor, action=action, limit=limit)
    return [
        {
            "seq": e.seq,
            "at": e.at.isoformat(),
            "actor": e.actor,
            "client": e.client,
            "action": e.action,
            "object": e.object,
            "detail": e.detail,
        }
        for e in found
    ]
