"""The relay: forwards the webhook inbox's pending rows to Prefect, and marks them only when Prefect has them.

Prefect's events API answers ``POST /events`` once the events are handed to its message broker, which may
still drop them (the in-memory broker drops when its queue is full) or die before they are stored. So a row is
marked forwarded only after the event is read back by id (``POST /events/filter``); until then its lease keeps
other relays away, and when the lease runs out any relay confirms first and sends again only what Prefect
lacks. A resend carries the same event id (uuid5 of the webhook id), which Prefect stores once.

Failures (Prefect down, 5xx, timeouts) release the rows with exponential backoff (`store.webhook_inbox`).
Database work runs in worker threads, so the relay never blocks the console's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from payops.store.webhook_inbox import InboxRow, WebhookInbox
from payops.tasks.events.payment_events import Emitter, envelope_to_event

__all__ = ["EmitterSender", "EventSender", "PrefectEventsSender", "Relay"]

log = logging.getLogger("payops.webhooks.relay")

BATCH = 100
CONFIRM_PAGE = 50  # the largest page Prefect's /events/filter answers
# Shortest time between two passes that found less than a batch. Every pass is a claim (a write to the payops
# database) and a POST to Prefect's events API, whose SQLite also serves flow-run creation: without a pace a
# storm made one pass per forwarded delivery. A forwarded event waits at most this much longer.
PACE_S = 1.0


class EventSender(Protocol):
    """Where the relay sends events (keyword dicts of ``emit_event``) and how it learns they arrived."""

    async def send(self, events: list[dict[str, Any]]) -> None: ...

    async def confirm(self, events: list[dict[str, Any]]) -> set[uuid.UUID]: ...

    async def aclose(self) -> None: ...


class PrefectEventsSender:
    """Prefect's events API at ``PREFECT_API_URL``: ``POST /events``, then read back (``/events/filter``)."""

    def __init__(self) -> None:
        self._client: Any = None

    async def _http(self) -> Any:
        if self._client is None:
            from prefect.client.orchestration import get_client

            self._client = get_client()
            await self._client.__aenter__()
        return self._client._client

    async def send(self, events: list[dict[str, Any]]) -> None:
        from prefect.events import Event

        body = [Event(**e).model_dump(mode="json") for e in events]
        http = await self._http()
        await http.post("/events", json=body)  # raises on a non-2xx answer

    async def confirm(self, events: list[dict[str, Any]]) -> set[uuid.UUID]:
        http = await self._http()
        found: set[uuid.UUID] = set()
        for start in range(0, len(events), CONFIRM_PAGE):
            page = events[start : start + CONFIRM_PAGE]
            occurred = [e.get("occurred") or datetime.now(UTC) for e in page]
            window = {
                "since": (min(occurred) - timedelta(days=1)).isoformat(),
                "until": (max(datetime.now(UTC), max(occurred)) + timedelta(days=1)).isoformat(),
            }
            ids = [str(e["id"]) for e in page]
            r = await http.post(
                "/events/filter",
                json={"filter": {"id": {"id": ids}, "occurred": window}, "limit": CONFIRM_PAGE},
            )
            found |= {uuid.UUID(e["id"]) for e in r.json().get("events", [])}
        return found

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.__aexit__(None, None, None)


class EmitterSender:
    """A callable taking ``emit_event``'s keywords (tests, custom sinks) whose return means "it has it"."""

    def __init__(self, emitter: Emitter) -> None:
        self.emitter = emitter

    async def send(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            await asyncio.to_thread(self.emitter, **event)

    async def confirm(self, events: list[dict[str, Any]]) -> set[uuid.UUID]:
        return {e["id"] for e in events}

    async def aclose(self) -> None:
        return None


def _event(row: InboxRow) -> dict[str, Any]:
    event = envelope_to_event(row.envelope)
    event.setdefault("occurred", datetime.fromtimestamp(row.received_at, UTC))
    return event


class Relay:
    """Forward pending inbox rows until stopped; restart-safe and safe beside other relays on one database."""

    def __init__(
        self,
        inbox: WebhookInbox,
        sender: EventSender,
        *,
        lease_s: float = 30.0,
        idle_s: float = 0.5,
        batch: int = BATCH,
        confirm_every_s: float = 1.0,
        pace_s: float = PACE_S,
    ) -> None:
        self.inbox = inbox
        self.sender = sender
        self.lease_s = lease_s
        self.idle_s = idle_s
        self.batch = batch
        self.confirm_every_s = confirm_every_s
        self.pace_s = pace_s
        self._confirmed_at = 0.0
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.wake = asyncio.Event()
        self._stop = asyncio.Event()

    async def _confirm(self, rows: Iterable[InboxRow]) -> set[str]:
        by_event = {uuid.UUID(str(e["id"])): (row, e) for row in rows for e in [_event(row)]}
        if not by_event:
            return set()
        have = await self.sender.confirm([e for _row, e in by_event.values()])
        done = [by_event[i][0].id for i in have if i in by_event]
        await asyncio.to_thread(self.inbox.mark_forwarded, done)
        return set(done)

    async def step(self) -> int:
        """One pass: confirm what this relay sent, then lease, confirm-or-send one batch. Rows handled."""
        handled = 0
        if time.monotonic() - self._confirmed_at >= self.confirm_every_s:
            self._confirmed_at = time.monotonic()
            awaiting = await asyncio.to_thread(self.inbox.awaiting, self.owner)
            try:
                handled += len(await self._confirm(awaiting))
            except Exception as exc:  # noqa: BLE001 - Prefect unreachable: leases expire, rows are retried
                log.warning("relay: confirming %d events failed (%s)", len(awaiting), type(exc).__name__)
        rows = await asyncio.to_thread(self.inbox.claim, self.owner, self.batch, self.lease_s)
        if not rows:
            return handled
        try:
            confirmed = await self._confirm([r for r in rows if r.sent_at is not None])
            to_send = [r for r in rows if r.id not in confirmed]
            if to_send:
                await self.sender.send([_event(r) for r in to_send])
                await asyncio.to_thread(
                    self.inbox.mark_sent, [r.id for r in to_send], self.owner, self.lease_s
                )
        except Exception as exc:  # noqa: BLE001 - any failure to hand over: retry these rows with backoff
            error = f"{type(exc).__name__}: {str(exc)[:120]}"
            await asyncio.to_thread(self.inbox.mark_failed, rows, error)
            log.warning("relay: forwarding %d events failed (%s); retrying with backoff", len(rows), error)
            return handled
        return handled + len(rows)

    async def run(self) -> None:
        """Forward until `stop`; sleeps `idle_s` (or until woken by a new delivery) when there is no work."""
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                handled = await self.step()
            except Exception as exc:  # noqa: BLE001 - database hiccup: log, wait, go on (never dies silently)
                log.error("relay: pass failed (%s: %s)", type(exc).__name__, str(exc)[:200])
                handled = 0
            if handled >= self.batch:
                continue  # a backlog: full batches back to back
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), self.idle_s)
            except TimeoutError:
                pass  # the idle poll: other receivers may have added rows
            # a partial batch: let rows gather, so Prefect gets one POST per `pace_s`, not one per delivery
            rest = self.pace_s - (time.monotonic() - started)
            if rest > 0 and not self._stop.is_set():
                try:
                    await asyncio.wait_for(self._stop.wait(), rest)
                except TimeoutError:
                    pass

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()

    async def drain(self, timeout_s: float) -> int:
        """Forward until nothing is pending or ``timeout_s`` passes (catch-up, tests); rows still pending."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._confirmed_at = 0.0
            if not await self.step():
                pending = await asyncio.to_thread(self.inbox.backlog)
                if not pending:
                    return 0
                await asyncio.sleep(self.idle_s)
        return await asyncio.to_thread(self.inbox.backlog)
