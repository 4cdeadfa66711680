"""The audit trail read on the server host itself, when no payops server runs (`payops audit verify|list`
without a server): the host holds the database and the audit key. With a `payops serve` of this home running,
its Prefect server (and its login) is found through the home's record, so each entry is also compared with
its Prefect event."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import typer
from payops.deployments.cli._common import EXIT_ERROR, cli_settings, payops_database

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings


def verify_locally() -> None:
    """`payops audit verify` on this host: the chain with the home's key, and each entry against its Prefect
    event when a Prefect server is at hand (the configured one; none is started for this)."""
    from payops.store.audit import verify

    settings = cli_settings()
    key = settings.audit_key_bytes()
    copies = _prefect_copies(settings, key)
    with payops_database(settings) as engine:
        verdict = verify(engine, copies, key=key)
    if verdict.ok:
        compared = f"; {len(set(copies))} compared with their Prefect events" if copies is not None else ""
        typer.echo(f"audit trail intact: {verdict.entries} entries{compared}")
        return
    for problem in verdict.problems:
        typer.echo(f"audit trail broken: {problem}", err=True)
    raise typer.Exit(EXIT_ERROR)


def _prefect_copies(settings: PayopsSettings, key: bytes) -> list[tuple[int, str]] | None:
    """The audit chain's copies in the Prefect events of the configured server or the home's running serve;
    None, said on stderr, when there is no such server or it cannot be read (the chain alone is checked)."""
    from payops.deployments.prefect_login import PrefectLoginUnreadable
    from payops.deployments.prefect_server import ServeUnreachable, running_prefect_api
    from payops.store.audit import chain_id
    from payops.tasks.events.auditing import event_copies

    try:
        with running_prefect_api(settings) as api:
            if api is None:
                why = "no Prefect API configured and no payops serve running for this home"
            else:
                return asyncio.run(event_copies(chain_id(key)))
    except (ServeUnreachable, PrefectLoginUnreadable) as exc:  # their messages name no secret
        why = str(exc)
    except Exception as exc:  # noqa: BLE001 - the chain is still checked; say why the copies were not
        why = type(exc).__name__
    typer.echo(f"Prefect events not compared ({why}): only the chain is checked", err=True)
    return None


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
