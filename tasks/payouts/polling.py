"""Polling payouts until a final status: many per call, per-reference reads only for stragglers.

A run does not wait for a person: once every payout still moving is in review or held
(``PAYOUT_AWAITING_REVIEW_STATUSES``) and has been for the settle window, polling ends and the run reports
them as awaiting review (`tasks.payouts.followup` follows them afterwards). A payout that fails is told at
once (the progress watcher, the progress artifact), not at the end. A round whose reads fail transiently (the
client gave up) is counted and the next round tries again: only the deadline ends a poll early.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from payops.connectors.payments import (
    APIConnectionError,
    InternalServerError,
    NotFoundError,
    PaymentsClient,
    PaymentsSettings,
    RateLimitError,
)
from payops.connectors.payments.models import (
    PAYOUT_AWAITING_REVIEW_STATUSES,
    PAYOUT_FAILED_STATUSES,
    PAYOUT_FINAL_STATUSES,
)
from payops.tasks.payouts.poll_loop import PAYOUT_BACKOFF, Backoff, PollRounds, poll_until
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.progress import progress
from payops.tasks.runtime.ratelimit import LimiterStats
from payops.tasks.runtime.retries import API_TASK_RETRY
from prefect import task
from prefect.cache_policies import NO_CACHE

log = logging.getLogger(__name__)

PAGE = 100
SETTLE_MARGIN_S = 0.02
"""Read this long after the moment the last payout should be final (`SettleClock`): timestamps are to the
millisecond."""
Gate = AbstractAsyncContextManager[Any]
"""What admits a read: a semaphore, or `tasks.runtime.inflight.InFlight`."""


@dataclass(slots=True)
class PayoutState:
    """The last known state of one payout."""

    reference: str
    status: str
    fee: str | None = None
    failure_reason: str | None = None
    completed_at: str | None = None
    created_at: datetime | None = None
    """When the service created the payout: places it in a time window of the transaction list."""

    @property
    def final(self) -> bool:
        return self.status in PAYOUT_FINAL_STATUSES

    @property
    def awaiting_review(self) -> bool:
        return self.status in PAYOUT_AWAITING_REVIEW_STATUSES

    @property
    def failed(self) -> bool:
        return self.status in PAYOUT_FAILED_STATUSES


@dataclass
class PollResult(PollRounds):
    states: dict[str, PayoutState]
    calls_per_round: list[int] = field(default_factory=list)
    limiter: LimiterStats | None = None
    settle_window_reached: bool = False
    """Polling ended because everything still moving had waited for a person past the settle window."""
    failed_rounds: int = 0
    """Rounds whose reads failed transiently (the states kept, read again next round)."""

    @property
    def pending(self) -> list[str]:
        return [r for r, s in self.states.items() if not s.final]

    @property
    def awaiting_review(self) -> list[str]:
        return [r for r, s in self.states.items() if s.awaiting_review]

    @property
    def failed(self) -> list[str]:
        return [r for r, s in self.states.items() if s.failed]


_TRANSIENT = (APIConnectionError, InternalServerError, RateLimitError)


def _state_from(record: Any, known: PayoutState | None = None) -> PayoutState:
    return PayoutState(
        reference=record.reference,
        status=record.status,
        fee=None if record.fee is None else str(record.fee),
        failure_reason=record.failure_reason,
        completed_at=record.completed_at.isoformat() if record.completed_at else None,
        created_at=record.created_at or (known.created_at if known else None),
    )


@dataclass
class Window:
    """A slice ``[start, end)`` of the transaction list by creation time, and this run's payouts in it."""

    start: datetime
    end: datetime
    references: set[str]


def pending_windows(states: dict[str, PayoutState], page: int = PAGE) -> list[Window]:
    """Time windows of the transaction list that hold every pending payout, each holding at most ``page`` of
    this run's payouts: one list call per window, and windows whose payouts are all final are not read again.

    A batch's payouts share one creation time, so a window is one or more consecutive batches. ``end`` is the
    last creation time plus the precision the service shows (1 ms, or 1 s when it shows whole seconds).
    """
    by_time: dict[datetime, list[str]] = {}
    pending_at: set[datetime] = set()
    for s in states.values():
        if s.created_at is not None:
            by_time.setdefault(s.created_at, []).append(s.reference)
            if not s.final:
                pending_at.add(s.created_at)
    if not pending_at:
        return []
    whole_seconds = all(t.microsecond == 0 for t in by_time)
    step = timedelta(seconds=1) if whole_seconds else timedelta(milliseconds=1)
    windows: list[Window] = []
    current: Window | None = None
    for t in sorted(by_time):
        refs = by_time[t]
        if current is not None and (t not in pending_at or len(current.references) + len(refs) > page):
            windows.append(current)
            current = None
        if t in pending_at:
            if current is None:
                current = Window(t, t + step, set(refs))
            else:
                current.end = t + step
                current.references.update(refs)
    if current is not None:
        windows.append(current)
    return windows


async def _refresh_window(client: PaymentsClient, states: dict[str, PayoutState], window: Window) -> int:
    """Read one window of the payout list, following the cursor until every payout of ours in it was seen
    (other payouts may share the window; a full last page still carries a cursor)."""
    calls = 0
    cursor: str | None = None
    missing = set(window.references)
    while True:
        page = await client.transactions.list(
            kind="payout", from_=window.start, to=window.end, limit=PAGE, cursor=cursor
        )
        calls += 1
        for tx in page.items:
            known = states.get(tx.reference)
            if known is not None:
                states[tx.reference] = _state_from(tx, known)
                missing.discard(tx.reference)
        cursor = page.next_cursor
        if not cursor or not missing:
            return calls


async def _refresh_by_listing(
    client: PaymentsClient, states: dict[str, PayoutState], windows: list[Window], gate: Gate
) -> int:
    """Read the given windows, as many at once as ``gate`` admits; returns the number of calls."""

    async def one(window: Window) -> int:
        async with gate:
            return await _refresh_window(client, states, window)

    return sum(await asyncio.gather(*(one(w) for w in windows)))


async def _refresh_by_reference(
    client: PaymentsClient, states: dict[str, PayoutState], refs: Iterable[str], gate: Gate
) -> int:
    refs = list(refs)

    async def one(ref: str) -> None:
        async with gate:
            try:
                states[ref] = _state_from(await client.payouts.get(ref), states.get(ref))
            except NotFoundError:
                # Not visible yet: keep the last state, read next round.
                return

    await asyncio.gather(*(one(r) for r in refs))
    return len(refs)


def _earliest(*moments: float | None) -> float | None:
    return min((m for m in moments if m is not None), default=None)


@dataclass
class SettleClock:
    """When the payouts still moving should be final, judged by the ones already final: the service took
    ``settle_s`` at most from a payout's creation to its final status (``completed_at - created_at``, both in
    the service's clock). The poll reads again then instead of at its back-off's next step, which may come up
    to half a second (loopback) or many seconds (a long back-off) after the last payout settled.

    ``offset`` maps the service's clock to the poll's: taken when the poll starts, from the newest creation
    time the batches' answers carry, which is at or before the service's now; a payout is thus expected at
    the earliest when it can be final, never before. A hint only: it shortens a wait, never lengthens one,
    and once the expected moment has passed the back-off decides alone again.
    """

    offset: float | None
    settle_s: float | None = None

    @classmethod
    def start(cls, states: Iterable[PayoutState], now: float) -> SettleClock:
        newest = max((s.created_at for s in states if s.created_at is not None), default=None)
        return cls(None if newest is None else now - newest.timestamp())

    def learn(self, were_pending: Iterable[PayoutState]) -> None:
        """Take the settle times of those of ``were_pending`` (read in this round) that are final now."""
        for s in were_pending:
            if not s.final or s.created_at is None or s.completed_at is None:
                continue
            completed = datetime.fromisoformat(s.completed_at)
            if (completed.tzinfo is None) != (s.created_at.tzinfo is None):
                continue  # one with an offset, one without: not comparable
            took = (completed - s.created_at).total_seconds()
            if took >= 0 and (self.settle_s is None or took > self.settle_s):
                self.settle_s = took

    def all_final_at(self, pending: Iterable[PayoutState], now: float) -> float | None:
        """When (the poll's clock, after ``now``) every payout of ``pending`` not waiting for a person should
        be final; None before any payout was seen final, without such a payout, or when that moment has
        passed (they took longer: the back-off decides)."""
        if self.offset is None or self.settle_s is None:
            return None
        moving = (s.created_at for s in pending if s.created_at is not None and not s.awaiting_review)
        newest = max(moving, default=None)
        if newest is None:
            return None
        moment = newest.timestamp() + self.settle_s + self.offset + SETTLE_MARGIN_S
        return moment if moment > now else None


async def poll_until_final(
    client: PaymentsClient,
    states: dict[str, PayoutState],
    *,
    deadline_s: float,
    settle_window_s: float | None = None,
    backoff: Backoff = PAYOUT_BACKOFF,
    concurrency: int = 8,
    gate: Gate | None = None,
    on_round: Callable[[PollResult], Awaitable[None]] | None = None,
    on_failed: Callable[[list[PayoutState]], Awaitable[None]] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> PollResult:
    """Refresh `states` until every payout is final, or every one still moving has waited for a person (in
    review, held) for ``settle_window_s`` (None: wait for them to the deadline), or the deadline passes.

    A round lists the time windows of the transaction list that hold pending payouts (one call per window
    of at most 100 of them, read concurrently; windows already final are not read again), and reads
    stragglers one by one once they are fewer than the windows. Reads go as ``gate`` admits them (the
    task's: sized by the service's pace and round trip, `tasks.runtime.inflight`), or ``concurrency`` at a
    time. Intervals grow while nothing changes and shrink again when statuses move. ``on_failed`` hears of the
    payouts that failed in each round, once.
    """
    result = PollResult(states)
    gate = gate or asyncio.Semaphore(concurrency)
    waiting_since: dict[str, float] = {}
    told = {r for r, s in states.items() if s.failed}
    settle = SettleClock.start(states.values(), clock())

    def settle_at() -> float | None:
        """When the settle window of the payouts waiting for a person ends (None: something else moves)."""
        pending = result.pending
        if settle_window_s is None or not pending or any(r not in waiting_since for r in pending):
            return None
        return max(waiting_since[r] for r in pending) + settle_window_s

    def settled() -> bool:
        moment = settle_at()
        return moment is not None and clock() >= moment

    async def refresh() -> bool:
        pending = result.pending
        before = Counter(s.status for s in states.values())
        windows = pending_windows(states)
        undated = [r for r in pending if states[r].created_at is None]
        try:
            if len(pending) < len(windows):
                calls = await _refresh_by_reference(client, states, pending, gate)
            else:
                calls = await _refresh_by_listing(client, states, windows, gate)
                calls += await _refresh_by_reference(client, states, undated, gate)
        except _TRANSIENT as exc:  # the client gave up on a read: keep the states, read again next round
            result.failed_rounds += 1
            log.warning("poll round %d failed (%s): read again next round", result.rounds + 1, exc)
            calls = 0
        now = clock()
        settle.learn(states[r] for r in pending)
        for ref, s in states.items():
            if s.awaiting_review:
                waiting_since.setdefault(ref, now)
            else:
                waiting_since.pop(ref, None)
        result.rounds += 1
        result.calls_per_round.append(calls)
        newly_failed = [s for r, s in states.items() if s.failed and r not in told]
        told.update(s.reference for s in newly_failed)
        if newly_failed and on_failed is not None:
            await on_failed(newly_failed)
        if on_round is not None:
            await on_round(result)
        return Counter(s.status for s in states.values()) != before

    def wake_at() -> float | None:
        """The settle window's end, or when every payout still moving should be final, if sooner."""
        expected = settle.all_final_at((states[r] for r in result.pending), clock())
        return _earliest(settle_at(), expected)

    progress = await poll_until(
        refresh,
        lambda: not result.pending or settled(),
        deadline_s,
        backoff,
        sleep=sleep,
        wake_at=wake_at,
        clock=clock,
    )
    result.deadline_reached = progress.deadline_reached
    result.settle_window_reached = bool(result.pending) and settled()
    return result


def progress_description(
    label: str, final: int, total: int, awaiting_review: int = 0, failed: int = 0
) -> str:
    """The progress artifact's description: the counts behind its percentage, failures first."""
    failures = f", {failed:,} failed" if failed else ""
    waiting = f", {awaiting_review:,} awaiting review" if awaiting_review else ""
    return f"{final:,} of {total:,} payouts final{failures}{waiting} (run {label})"


@dataclass(frozen=True)
class Share:
    """A poll that follows a share of a run's payouts (a run too large to hold follows a part at a time):
    the run's payouts final before it, and the run's total, for the progress it shows."""

    final_before: int = 0
    total: int | None = None


async def _progress(result: PollResult, artifact_id: Any, label: str, share: Share) -> None:
    from prefect.artifacts import aupdate_progress_artifact

    total = share.total or len(result.states)
    done = share.final_before + len(result.states) - len(result.pending)
    await aupdate_progress_artifact(
        artifact_id=artifact_id,
        progress=100.0 * done / (total or 1),
        description=progress_description(label, done, total, len(result.awaiting_review), len(result.failed)),
    )


async def _failures_artifact(label: str, failed: list[PayoutState]) -> None:
    """The payouts failed so far, as a table artifact (a new version each round that adds failures): seen in
    the Prefect UI while the run still polls the others."""
    from payops.tasks.reports.artifacts import artifact_key
    from prefect.artifacts import acreate_table_artifact

    await acreate_table_artifact(
        key=artifact_key(label, "failed-so-far"),
        table=[
            {"reference": s.reference, "status": s.status, "failure reason": s.failure_reason or ""}
            for s in failed[:500]
        ],
        description=f"Payouts of run {label} that failed so far (first 500); retry them now: payops payouts "
        f"retry-failed {label}, or Retry failed rows now on the console's run page",
    )


@task(cache_policy=NO_CACHE, name="poll-payouts", **API_TASK_RETRY)
async def poll_payouts_task(
    settings: PaymentsSettings,
    states: dict[str, PayoutState],
    deadline_at: float,
    rate_per_s: float,
    label: str,
    settle_window_s: float | None = None,
    on_failed: Callable[[list[PayoutState]], Awaitable[None]] | None = None,
    share: Share | None = None,
) -> PollResult:
    """Prefect task: all polling of a run in one task, with a progress artifact updated each round and the
    failures shown as they happen (and handed to ``on_failed``: the run records them for an early retry).
    ``deadline_at`` is a wall-clock time (``time.time()``), so a retry of the task polls only what is left of
    the run's deadline."""
    from payops.tasks.reports.artifacts import artifact_key
    from prefect.artifacts import acreate_progress_artifact

    share = share or Share()
    total = share.total or len(states)
    artifact_id = await acreate_progress_artifact(
        progress=100.0 * share.final_before / (total or 1),
        key=artifact_key(label, "progress"),
        description=progress_description(label, share.final_before, total),
    )
    failed_so_far: list[PayoutState] = [s for s in states.values() if s.failed]
    if failed_so_far and on_failed is not None:  # failed already when sent (a re-run's replayed answers)
        await on_failed(list(failed_so_far))

    async def on_round(result: PollResult) -> None:
        await _progress(result, artifact_id, label, share)
        final = share.final_before + len(result.states) - len(result.pending)
        progress().payouts(final, total, len(result.awaiting_review))

    async def tell_failed(newly: list[PayoutState]) -> None:
        for s in newly:
            progress().failed(s.reference, s.status, s.failure_reason)
        failed_so_far.extend(newly)
        await _failures_artifact(label, failed_so_far)
        if on_failed is not None:
            await on_failed(newly)

    async with payments_client(settings, rate_per_s=rate_per_s) as (client, transport):
        result = await poll_until_final(
            client,
            states,
            deadline_s=max(0.0, deadline_at - time.time()),
            settle_window_s=settle_window_s,
            gate=transport.in_flight(),
            on_round=on_round,
            on_failed=tell_failed,
        )
        result.api_calls = Counter(client.api_calls)
        result.limiter = transport.stats
        return result
