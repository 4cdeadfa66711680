"""Events catch-up: read ``GET /v1/events`` from a saved cursor and emit each event once as a Prefect event.

State lives in two Prefect Variables (names: lowercase letters, digits, dashes, underscores):

* ``<name>`` (default ``payments-events-cursor``): the id of the last event of the last fully processed page;
  an operator can read or reset it with ``prefect variable get|set``;
* ``<name>-seen``: the ids of the most recently processed events (newest last, at most `SEEN_CAPACITY`).

The webhook inbox of the payops database (`store.webhook_inbox`) is the seen-ids list shared with the webhook
receiver: an event the receiver kept is skipped here, and every event read here is kept there (marked
forwarded when this run emitted it), so a later delivery of it is answered ``duplicate`` and not forwarded
again. The forward filter (``forward``, the rules of ``PAYOPS_WEBHOOK_FORWARD``; default here ``*``) chooses
what is emitted; the rest is kept for audit only.

Order per event: skip it when its id is in the seen list or the inbox; else emit, keep it in the inbox, then
save the seen list. The cursor is saved after each page. A crash between emitting and saving the cursor
therefore replays that page on the next run, and the seen list skips every event already emitted
(`SEEN_CAPACITY` > a page). The one window left, a crash between the emit and the seen-list save, emits that
single event again with the same Prefect event id (uuid5 of the envelope id), which Prefect's triggers
deduplicate.

A cursor the service no longer knows (events are kept 90 days; 400 ``invalid_input``) restarts the feed from
its first event; the seen list and the stable event ids protect against re-emitting.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from payops.connectors.payments import BadRequestError, PaymentsClient, PaymentsSettings
from payops.store.settings import PayopsSettings
from payops.store.webhook_inbox import WebhookInbox
from payops.tasks.events.payment_events import Emitter, ForwardFilter, default_emitter, emit
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.retries import API_TASK_RETRY
from prefect import task
from prefect.cache_policies import NO_CACHE

log = logging.getLogger(__name__)

DEFAULT_CURSOR_VARIABLE = "payments-events-cursor"
VARIABLE_NAME_PATTERN = r"^[a-z0-9_-]{1,200}$"
SEEN_SUFFIX = "-seen"
PAGE_SIZE = 50
SEEN_CAPACITY = 100  # ids of ~36 characters: the JSON stays under Prefect's 5,000-character variable limit


class CursorStore(Protocol):
    """Where the cursor and the recently processed ids are kept between runs."""

    async def load(self) -> tuple[str | None, list[str]]: ...

    async def save_seen(self, seen: list[str]) -> None: ...

    async def save_cursor(self, after: str | None) -> None: ...


class VariableCursorStore:
    """The cursor and the seen ids in two Prefect Variables (``name`` and ``name-seen``)."""

    def __init__(self, name: str = DEFAULT_CURSOR_VARIABLE) -> None:
        self.name = name
        self.seen_name = name + SEEN_SUFFIX

    async def load(self) -> tuple[str | None, list[str]]:
        from prefect.variables import Variable

        after = await Variable.aget(self.name, default=None)
        seen = await Variable.aget(self.seen_name, default=[])
        return (str(after) if after else None), [str(i) for i in (seen or [])]

    async def save_seen(self, seen: list[str]) -> None:
        from prefect.variables import Variable

        await Variable.aset(self.seen_name, list(seen), overwrite=True)

    async def save_cursor(self, after: str | None) -> None:
        from prefect.variables import Variable

        await Variable.aset(self.name, after or "", overwrite=True)


@dataclass
class SyncResult:
    """What one catch-up read and emitted."""

    cursor_before: str | None
    cursor_after: str | None
    read: int = 0
    emitted: int = 0
    kept_not_forwarded: int = 0
    duplicates_skipped: int = 0
    pages: int = 0
    restarted_without_cursor: bool = False
    oldest_emitted_at: datetime | None = None
    by_type: Counter[str] = field(default_factory=Counter)
    api_calls: Counter[str] = field(default_factory=Counter)


def load_emitter(path: str | None) -> Emitter:
    """The emitter named ``module:attribute`` (a callable taking `emit_event`'s keywords), else Prefect's."""
    if not path:
        return default_emitter
    module, _, attribute = path.partition(":")
    if not module or not attribute:
        raise ValueError(f"emitter must be 'module:attribute', got {path!r}")
    target = getattr(importlib.import_module(module), attribute)
    if not callable(target):
        raise ValueError(f"emitter {path!r} is not callable")
    return target


async def sync_events(
    client: PaymentsClient,
    store: CursorStore,
    emitter: Emitter | None = None,
    *,
    page_size: int = PAGE_SIZE,
    inbox: WebhookInbox | None = None,
    forward: ForwardFilter | None = None,
) -> SyncResult:
    """Emit every event after the saved cursor once (those ``forward`` selects; default all), keeping each in
    ``inbox``; save the seen ids per event and the cursor per page."""
    if page_size > SEEN_CAPACITY:
        raise ValueError(f"page_size must be at most {SEEN_CAPACITY} (the seen list covers one page)")
    after, seen_ids = await store.load()
    seen: deque[str] = deque(seen_ids, maxlen=SEEN_CAPACITY)
    seen_set = set(seen)
    result = SyncResult(cursor_before=after, cursor_after=after)
    cursor = after
    while True:
        try:
            page = await client.events.list(after=cursor, limit=page_size)
        except BadRequestError as exc:
            if cursor is None or result.pages or result.restarted_without_cursor:
                raise
            log.warning(
                "events cursor %s refused (%s): older than the 90-day retention or unknown; restarting from "
                "the first event (already processed ids are skipped)",
                cursor,
                exc.code,
            )
            result.restarted_without_cursor = True
            cursor = None
            continue
        result.pages += 1
        for envelope in page.items:
            result.read += 1
            if envelope.id in seen_set or (
                inbox is not None and await asyncio.to_thread(inbox.__contains__, envelope.id)
            ):
                result.duplicates_skipped += 1
                continue
            selected = forward is None or forward(envelope)
            if selected:
                emit(envelope, emitter)
            if inbox is not None:
                wire = envelope.model_dump(mode="json", by_alias=True)
                await asyncio.to_thread(
                    inbox.accept, wire, forward=selected, forwarded=True, source="catch-up"
                )
            seen.append(envelope.id)
            seen_set = set(seen)
            await store.save_seen(list(seen))
            if selected:
                result.emitted += 1
                if (
                    envelope.created_at
                    and (result.oldest_emitted_at or envelope.created_at) >= envelope.created_at
                ):
                    result.oldest_emitted_at = envelope.created_at
                result.by_type[envelope.type] += 1
            else:
                result.kept_not_forwarded += 1
        if page.items:
            cursor = page.items[-1].id
            await store.save_cursor(cursor)
            result.cursor_after = cursor
        if not page.next_after or not page.items:
            break
    result.api_calls = Counter(client.api_calls)
    return result


@task(
    cache_policy=NO_CACHE,
    name="sync-payment-events",
    **API_TASK_RETRY,
)
async def sync_events_task(
    settings: PaymentsSettings,
    payops: PayopsSettings,
    variable: str,
    page_size: int,
    rate_per_s: float,
    emitter_path: str | None = None,
    forward: str = "*",
) -> SyncResult:
    """Catch up from the cursor in Variable `variable` (a retry resumes from what was saved), sharing the
    payops database's webhook inbox."""
    from payops.store import open_database

    emitter = load_emitter(emitter_path)
    inbox = WebhookInbox(await asyncio.to_thread(open_database, payops))
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        return await sync_events(
            client,
            VariableCursorStore(variable),
            emitter,
            page_size=page_size,
            inbox=inbox,
            forward=ForwardFilter(forward),
        )
