"""Polling payouts until a final status: many per call, per-reference reads only for stragglers."""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from connectors.payments import NotFoundError, PaymentsClient, PaymentsSettings
from tasks.clients import payments_client
from tasks.ratelimit import LimiterStats

FINAL = frozenset({"delivered", "failed", "refunded"})
AWAITING_REVIEW = frozenset({"in_review", "held"})
PAGE = 100


@dataclass
class PayoutState:
    """The last known state of one payout."""

    reference: str
    status: str
    fee: str | None = None
    failure_reason: str | None = None
    completed_at: str | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL


@dataclass
class PollResult:
    states: dict[str, PayoutState]
    rounds: int = 0
    calls_per_round: list[int] = field(default_factory=list)
    deadline_reached: bool = False
    api_calls: Counter[str] = field(default_factory=Counter)
    limiter: LimiterStats | None = None

    @property
    def pending(self) -> list[str]:
        return [r for r, s in self.states.items() if not s.final]


def _state_from(record: Any) -> PayoutState:
    return PayoutState(
        reference=record.reference,
        status=record.status,
        fee=None if record.fee is None else str(record.fee),
        failure_reason=record.failure_reason,
        completed_at=record.completed_at.isoformat() if record.completed_at else None,
    )


async def _refresh_by_listing(client: PaymentsClient, states: dict[str, PayoutState], since: datetime) -> int:
    """One pass over the payouts created since `since`: ceil(N/100) calls for N payouts in the window."""
    calls = 0
    cursor: str | None = None
    while True:
        page = await client.transactions.list(kind="payout", from_=since, limit=PAGE, cursor=cursor)
        calls += 1
        for tx in page.items:
            if tx.reference in states:
                states[tx.reference] = _state_from(tx)
        cursor = page.next_cursor
        if not cursor:
            return calls


async def _refresh_by_reference(
    client: PaymentsClient, states: dict[str, PayoutState], refs: Iterable[str], concurrency: int
) -> int:
    sem = asyncio.Semaphore(concurrency)
    refs = list(refs)

    async def one(ref: str) -> None:
        async with sem:
            try:
                states[ref] = _state_from(await client.payouts.get(ref))
            except NotFoundError:
                # Not visible yet: keep the last state, read next round.
                return

    await asyncio.gather(*(one(r) for r in refs))
    return len(refs)


async def poll_until_final(
    client: PaymentsClient,
    states: dict[str, PayoutState],
    *,
    since: datetime,
    deadline_s: float,
    first_interval_s: float = 0.5,
    max_interval_s: float = 15.0,
    concurrency: int = 8,
    on_round: Callable[[PollResult], Awaitable[None]] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> PollResult:
    """Refresh `states` until every payout is final or the deadline passes.

    A round lists the run's window of the transaction list (one call per 100 payouts) while many payouts are
    moving, and reads stragglers one by one once they are fewer than the pages a listing would cost.
    Intervals grow while nothing changes and shrink again when statuses move.
    """
    result = PollResult(states)
    window = since - timedelta(seconds=5)
    started = time.monotonic()
    interval = first_interval_s
    pages = max(1, math.ceil(len(states) / PAGE))
    while True:
        pending = result.pending
        if not pending:
            break
        if time.monotonic() - started >= deadline_s:
            result.deadline_reached = True
            break
        before = Counter(s.status for s in states.values())
        if len(pending) < pages:
            calls = await _refresh_by_reference(client, states, pending, concurrency)
        else:
            calls = await _refresh_by_listing(client, states, window)
            pages = calls
        result.rounds += 1
        result.calls_per_round.append(calls)
        if on_round is not None:
            await on_round(result)
        if not result.pending:
            break
        moved = Counter(s.status for s in states.values()) != before
        interval = first_interval_s if moved else min(max_interval_s, interval * 1.6)
        remaining = deadline_s - (time.monotonic() - started)
        await sleep(max(0.0, min(interval, remaining)))
    return result


async def _progress(result: PollResult, artifact_id: Any) -> None:
    from prefect.artifacts import aupdate_progress_artifact

    total = len(result.states) or 1
    done = total - len(result.pending)
    await aupdate_progress_artifact(artifact_id=artifact_id, progress=100.0 * done / total)


@task(cache_policy=NO_CACHE, name="poll-payouts", retries=2, retry_delay_seconds=5)
async def poll_payouts_task(
    settings: PaymentsSettings,
    states: dict[str, PayoutState],
    since: datetime,
    deadline_s: float,
    rate_per_s: float,
    label: str,
) -> PollResult:
    """Prefect task: all polling of a run in one task, with a progress artifact updated each round."""
    from prefect.artifacts import acreate_progress_artifact

    from tasks.artifacts import artifact_key

    artifact_id = await acreate_progress_artifact(
        progress=0.0, key=artifact_key(label, "progress"), description=f"Payouts final for run {label}"
    )

    async def on_round(result: PollResult) -> None:
        await _progress(result, artifact_id)

    async with payments_client(settings, rate_per_s=rate_per_s) as (client, transport):
        result = await poll_until_final(client, states, since=since, deadline_s=deadline_s, on_round=on_round)
        result.api_calls = Counter(client.api_calls)
        result.limiter = transport.stats
        return result
