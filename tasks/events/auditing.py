"""Recording an audit entry: the hash-chained row (store/audit.py) and its Prefect event ``payops.*``.

The event names the actor as a related resource (role ``actor``), so the entry shows in Prefect's event feed
and can be filtered by user there; it is also the copy outside the database (``audit_seq``, ``audit_hash``
and the chain's public name) that `payops audit verify` compares, which shows a truncated or edited chain.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC
from typing import Any

from payops.store.audit import AuditEntry, append, chain_id
from payops.tasks.events.payment_events import Emitter, default_emitter
from sqlalchemy import Engine

log = logging.getLogger("payops.audit")


def audit_event(entry: AuditEntry, chain: str) -> dict[str, Any]:
    """Keyword arguments of ``prefect.events.emit_event`` for one audit entry of the chain named ``chain``
    (`store.audit.chain_id`)."""
    kind, _, ident = entry.object.partition(":")
    return {
        "event": entry.action,
        "resource": {
            "prefect.resource.id": f"payops.{kind or 'object'}.{ident or entry.object}",
            "prefect.resource.name": entry.object,
        },
        "related": [
            {
                "prefect.resource.id": f"payops.user.{entry.actor}",
                "prefect.resource.role": "actor",
                "prefect.resource.name": entry.actor,
            }
        ],
        "payload": {
            "client": entry.client,
            "detail": json.loads(entry.detail),
            "audit_seq": entry.seq,
            "audit_hash": entry.hash,
            "audit_chain": chain,
        },
        "occurred": entry.at.replace(tzinfo=UTC),
    }


class Auditor:
    """``record(actor, "login.failed", "user:ann", client, **detail)``: row payops.login.failed + event.
    ``key`` is the chain's key (`store.settings.PayopsSettings.audit_key_bytes`)."""

    def __init__(self, engine: Engine, emitter: Emitter = default_emitter, *, key: bytes) -> None:
        self.engine = engine
        self.emitter = emitter
        self.key = key
        self.chain = chain_id(key)

    def record(self, actor: str, action: str, obj: str, client: str = "", **detail: Any) -> AuditEntry:
        entry = append(self.engine, actor or "?", f"payops.{action}", obj, client, detail, key=self.key)
        try:
            self.emitter(**audit_event(entry, self.chain))
        except Exception as exc:  # noqa: BLE001 - the row is the record; a lost event copy must not fail the action
            log.warning("audit entry %d: Prefect event not emitted (%s)", entry.seq, type(exc).__name__)
        return entry


async def event_copies(chain: str, days: int = 30) -> list[tuple[int, str]]:
    """``(seq, hash)`` of the entries of the chain named ``chain`` (`store.audit.chain_id`) as their Prefect
    events recorded them (the last ``days``; a server keeps events for its retention period only)."""
    from datetime import datetime, timedelta

    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventOccurredFilter

    mine = chain
    found: list[tuple[int, str]] = []
    since = datetime.now(UTC) - timedelta(days=days)
    query = EventFilter(event=EventNameFilter(prefix=["payops."]), occurred=EventOccurredFilter(since=since))
    async with get_client() as client:
        page = await client.read_events(query, limit=50)  # the most a page may hold
        while True:
            for event in page.events:
                payload = event.payload or {}
                if payload.get("audit_chain") == mine and "audit_seq" in payload:
                    found.append((int(payload["audit_seq"]), str(payload["audit_hash"])))
            if not page.next_page:
                return found
            page = await client.read_events_page(str(page.next_page))
