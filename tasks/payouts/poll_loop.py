"""The one poll loop: refresh until everything is final or a deadline passes, waiting longer each round.

Payouts (``tasks.payouts.polling``), settlement runs (``tasks.settlements``) and utility purchases
(``tasks.utility_purchases``) differ only in how a round refreshes and what counts as final; the deadline and
the back-off live here.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    """Waits between rounds: ``first_s``, then ``growth`` times the previous wait, at most ``max_s``.

    ``wait_first``: wait ``first_s`` before the first round too. ``reset_on_change``: after a round that
    changed something wait ``first_s`` again, otherwise one step longer than before (counting from
    ``first_s``), so polling speeds up while statuses move.
    """

    first_s: float
    max_s: float
    growth: float = 1.6
    wait_first: bool = False
    reset_on_change: bool = False

    def next_wait(self, previous: float | None, changed: bool) -> float:
        """The wait after a round, given the previous wait (``None`` before any) and whether it changed."""
        if self.reset_on_change:
            return self.first_s if changed else min(self.max_s, (previous or self.first_s) * self.growth)
        return self.first_s if previous is None else min(self.max_s, previous * self.growth)


# Each family's cadence, side by side.
#: Payouts: short waits while statuses move, up to 15 s while nothing changes.
PAYOUT_BACKOFF = Backoff(0.5, 15.0, reset_on_change=True)
#: Settlement runs: first read after 0.25 s (a run just started is never final at once), up to 10 s.
SETTLEMENT_BACKOFF = Backoff(0.25, 10.0, wait_first=True)
#: Utility purchases: 0.3 s, growing to 10 s.
PURCHASE_BACKOFF = Backoff(0.3, 10.0)


@dataclass(kw_only=True)
class PollRounds:
    """What every poll reports: rounds made, whether the deadline cut it short, API calls by endpoint."""

    rounds: int = 0
    deadline_reached: bool = False
    api_calls: Counter[str] = field(default_factory=Counter)


async def poll_until(
    refresh: Callable[[], Awaitable[bool | None]],
    is_final: Callable[[], bool],
    deadline_s: float,
    backoff: Backoff,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    wake_at: Callable[[], float | None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> PollRounds:
    """Call ``refresh`` (one round; returns whether anything changed) until ``is_final()`` or ``deadline_s``
    seconds have passed. A wait never runs past the deadline, nor past ``wake_at()`` (a ``clock`` time when
    ``is_final`` may turn true without a change, e.g. a settle window ending; None: no such time)."""
    progress = PollRounds()
    started = clock()
    wait: float | None = None
    changed = False
    while not is_final():
        elapsed = clock() - started
        if elapsed >= deadline_s:
            progress.deadline_reached = True
            break
        if progress.rounds or backoff.wait_first:
            wait = backoff.next_wait(wait, changed)
            limit = deadline_s - elapsed
            moment = wake_at() if wake_at is not None else None
            if moment is not None:
                limit = min(limit, moment - clock())
            await sleep(max(0.0, min(wait, limit)))
        changed = bool(await refresh())
        progress.rounds += 1
    return progress
