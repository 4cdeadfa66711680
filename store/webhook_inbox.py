"""The webhook inbox: every accepted Payments Service event, kept before the 2xx answer, forwarded after.

One row per webhook id (the envelope's ``id``; every retry and replay of an event carries the same one), so
the primary key is the seen-ids list of the receiver and of the events catch-up alike. A row is ``pending``
while it is selected for forwarding and Prefect does not have it yet; relays (one per console process, several
on PostgreSQL) take ``pending`` rows under a lease, so one relay works on a row at a time:

* ``claim`` leases up to N due rows (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite has one writer);
* ``mark_sent`` records the send and extends the lease while Prefect's answer is confirmed;
* ``mark_forwarded`` ends the row's work (``pending`` false); ``mark_failed`` schedules a retry with backoff.

A relay that dies leaves its lease to expire; the next claim sees ``sent_at`` and confirms before resending.
Rows not selected for forwarding (``forward`` false) stay for audit. This module imports neither Prefect nor
httpx: the relay that talks to Prefect is ``tasks.events.event_relay``.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from payops.store.database import Base, upsert_insert
from sqlalchemy import Boolean, Engine, Float, Index, Integer, String, Text, case, func, or_, select, update
from sqlalchemy.orm import Mapped, mapped_column

__all__ = [
    "GroupCommit",
    "InboxRow",
    "InboxStatus",
    "WebhookInbox",
    "WebhookInboxEntry",
    "retry_delay",
]

log = logging.getLogger(__name__)

ERROR_CHARS = 200
MAX_BACKOFF_S = 300.0


class WebhookInboxEntry(Base):
    """One accepted event (by webhook id) and where its forwarding stands."""

    __tablename__ = "webhook_inbox"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    type: Mapped[str] = mapped_column(String(100))
    envelope: Mapped[str] = mapped_column(Text)  # the verified envelope as JSON (audit, catch-up, relay)
    source: Mapped[str] = mapped_column(String(16))  # "webhook" or "catch-up"
    received_at: Mapped[float] = mapped_column(Float)
    forward: Mapped[bool] = mapped_column(Boolean)  # selected by the forward filter when accepted
    pending: Mapped[bool] = mapped_column(Boolean)  # forward and Prefect does not have it yet
    forwarded_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    sent_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[float] = mapped_column(Float, default=0.0)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_error: Mapped[str | None] = mapped_column(String(ERROR_CHARS), nullable=True)

    __table_args__ = (Index("ix_webhook_inbox_pending", "pending", "received_at"),)


T = WebhookInboxEntry


@dataclass(frozen=True)
class InboxRow:
    """A leased row as the relay needs it."""

    id: str
    envelope: dict[str, Any]
    attempts: int
    sent_at: float | None
    received_at: float


@dataclass(frozen=True)
class InboxStatus:
    """What ``payops webhooks status`` shows."""

    total: int
    backlog: int
    oldest_unforwarded_at: float | None
    forwarded: int
    kept_only: int
    failing: int
    last_error: str | None


def retry_delay(attempts: int) -> float:
    """Seconds before retry number ``attempts`` (1, 2, 4, ... capped at `MAX_BACKOFF_S`)."""
    return min(MAX_BACKOFF_S, 2.0 ** max(0, attempts - 1))


class WebhookInbox:
    """The inbox table on an engine (SQLite or PostgreSQL); every method is one short transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _insert(self):  # noqa: ANN202 - dialect-specific Insert
        return upsert_insert(self.engine, T)

    def accept(
        self, envelope: dict[str, Any], *, forward: bool, source: str = "webhook", forwarded: bool = False
    ) -> bool:
        """Keep ``envelope`` (committed on return); False when its id is already in the inbox.

        ``forwarded``: the caller handed it to Prefect itself (the events catch-up), so it is not pending.
        """
        return envelope["id"] in self.accept_many([(envelope, forward)], source=source, forwarded=forwarded)

    def accept_many(
        self, items: list[tuple[dict[str, Any], bool]], *, source: str = "webhook", forwarded: bool = False
    ) -> set[str]:
        """Keep every ``(envelope, forward)`` in one transaction; the ids that were new."""
        now = time.time()
        rows = [
            {
                "id": envelope["id"],
                "type": envelope["type"],
                "envelope": json.dumps(envelope, separators=(",", ":"), default=str),
                "source": source,
                "received_at": now,
                "forward": forward,
                "pending": forward and not forwarded,
                "forwarded_at": now if forward and forwarded else None,
                "attempts": 0,
                "next_attempt_at": 0.0,
            }
            for envelope, forward in items
        ]
        # psycopg reports no rowcount for skipped inserts; the returned ids are portable
        stmt = self._insert().values(rows).on_conflict_do_nothing(index_elements=["id"]).returning(T.id)
        with self.engine.begin() as conn:
            return set(conn.execute(stmt).scalars())

    def __contains__(self, event_id: object) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(T.id).where(T.id == event_id)).first() is not None

    def backlog(self) -> int:
        """Rows selected for forwarding that Prefect does not have yet."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(T).where(T.pending)).scalar_one())

    def claim(self, owner: str, limit: int, lease_s: float) -> list[InboxRow]:
        """Lease up to ``limit`` due pending rows (oldest first) to ``owner`` for ``lease_s`` seconds."""
        now = time.time()
        due = (
            select(T.id)
            .where(T.pending, T.next_attempt_at <= now, or_(T.lease_until.is_(None), T.lease_until < now))
            .order_by(T.received_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        stmt = (
            update(T)
            .where(T.id.in_(due.scalar_subquery()))
            .values(lease_owner=owner, lease_until=now + lease_s)
            .returning(T.id, T.envelope, T.attempts, T.sent_at, T.received_at)
        )
        with self.engine.begin() as conn:
            rows = conn.execute(stmt).all()
        out = [InboxRow(r.id, json.loads(r.envelope), r.attempts, r.sent_at, r.received_at) for r in rows]
        return sorted(out, key=lambda r: r.received_at)

    def awaiting(self, owner: str) -> list[InboxRow]:
        """Rows ``owner`` sent whose arrival in Prefect is not confirmed yet."""
        stmt = select(T.id, T.envelope, T.attempts, T.sent_at, T.received_at).where(
            T.pending, T.lease_owner == owner, T.sent_at.is_not(None)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [InboxRow(r.id, json.loads(r.envelope), r.attempts, r.sent_at, r.received_at) for r in rows]

    def mark_sent(self, ids: list[str], owner: str, confirm_s: float) -> None:
        """Prefect accepted the send: keep the lease ``confirm_s`` seconds while its arrival is confirmed."""
        now = time.time()
        with self.engine.begin() as conn:
            conn.execute(
                update(T)
                .where(T.id.in_(ids), T.lease_owner == owner)
                .values(sent_at=now, lease_until=now + confirm_s)
            )

    def mark_forwarded(self, ids: list[str]) -> None:
        """Prefect has these events: their work is done."""
        if not ids:
            return
        with self.engine.begin() as conn:
            conn.execute(
                update(T)
                .where(T.id.in_(ids))
                .values(
                    pending=False,
                    forwarded_at=time.time(),
                    lease_owner=None,
                    lease_until=None,
                    last_error=None,
                )
            )

    def mark_failed(self, rows: list[InboxRow], error: str) -> None:
        """Sending failed: release the lease and retry each row after its backoff."""
        now = time.time()
        with self.engine.begin() as conn:
            for row in rows:
                attempts = row.attempts + 1
                conn.execute(
                    update(T)
                    .where(T.id == row.id, T.pending)
                    .values(
                        attempts=attempts,
                        next_attempt_at=now + retry_delay(attempts),
                        lease_owner=None,
                        lease_until=None,
                        sent_at=None,
                        last_error=error[:ERROR_CHARS],
                    )
                )

    def status(self) -> InboxStatus:
        """Counts for operators (backlog, oldest unforwarded, failures)."""
        with self.engine.connect() as conn:
            total, forwarded, kept = conn.execute(
                select(
                    func.count(),
                    func.count(T.forwarded_at),
                    func.sum(case((T.forward, 0), else_=1)),
                ).select_from(T)
            ).one()
            backlog, oldest = conn.execute(
                select(func.count(), func.min(T.received_at)).where(T.pending)
            ).one()
            failing = conn.execute(
                select(func.count()).select_from(T).where(T.pending, T.attempts > 0)
            ).scalar_one()
            last_error = conn.execute(
                select(T.last_error)
                .where(T.pending, T.last_error.is_not(None))
                .order_by(T.received_at.desc())
            ).scalar()
        return InboxStatus(
            int(total), int(backlog), oldest, int(forwarded), int(kept or 0), int(failing), last_error
        )


class GroupCommit:
    """Accepts from concurrent deliveries committed together by one writer thread.

    SQLite makes each commit durable with an fsync, ~20 ms on a busy disk: one transaction per delivery caps
    a receiver at a few dozen deliveries a second. Here request threads queue their envelope and wait; the
    writer takes whatever is queued (up to ``max_batch``), commits it in one transaction, then answers each
    waiter. Every caller still returns only after its own row is committed. (Hand-rolled: a queue, a thread
    and futures; no library offers group commit over SQLAlchemy.)
    """

    def __init__(
        self,
        inbox: WebhookInbox,
        max_batch: int = 256,
        on_commit: Callable[[list[tuple[dict[str, Any], bool]]], None] | None = None,
    ) -> None:
        """``on_commit(results)``: called in the writer thread with ``(envelope, new)`` for each committed
        delivery, before any of them is answered (the receiver logs them there)."""
        self.inbox = inbox
        self.max_batch = max_batch
        self.on_commit = on_commit
        self._queue: queue.Queue[tuple[dict[str, Any], bool, Future[bool]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def accept(self, envelope: dict[str, Any], forward: bool) -> bool:
        """Like `WebhookInbox.accept` (blocking until committed); False for an id already kept."""
        return self.submit(envelope, forward).result()

    def submit(self, envelope: dict[str, Any], forward: bool) -> Future[bool]:
        """Queue ``envelope``; the future resolves once it is committed (True) or was already kept (False).

        An async caller awaits it (``asyncio.wrap_future``) instead of parking a thread per delivery.
        """
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="webhook-inbox-writer", daemon=True)
                self._thread.start()
        done: Future[bool] = Future()
        self._queue.put((envelope, forward, done))
        return done

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            batch = [item]
            while len(batch) < self.max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(more)
            try:
                new = self.inbox.accept_many([(envelope, forward) for envelope, forward, _ in batch])
            except Exception as exc:  # noqa: BLE001 - each waiting delivery gets the error (its answer: 503)
                for _, _, done in batch:
                    done.set_exception(exc)
                continue
            results = []
            for envelope, _, _done in batch:
                results.append((envelope, envelope["id"] in new))
                new.discard(envelope["id"])  # the same id twice in one batch: the second is a duplicate
            if self.on_commit is not None:
                try:
                    self.on_commit(results)
                except Exception:  # noqa: BLE001 - a failing callback must not leave deliveries unanswered
                    log.exception("webhook inbox: on_commit failed")
            for (_envelope, first), (_, _, done) in zip(results, batch, strict=True):
                done.set_result(first)

    def close(self) -> None:
        """Finish what is queued, then stop the writer."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(30)
