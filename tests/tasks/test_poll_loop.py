"""The one poll loop: waits between rounds, the deadline, and when it stops."""

from __future__ import annotations

import pytest
from payops.tasks.payouts.poll_loop import Backoff, poll_until


@pytest.mark.parametrize(
    ("backoff", "changes", "waits"),
    [
        # Settlement runs: wait before the first read, then longer each time.
        (Backoff(0.25, 1.0, 2.0, wait_first=True), [False] * 4, [0.25, 0.5, 1.0, 1.0]),
        # Purchases: read at once, then first_s, growing.
        (Backoff(0.3, 10.0, 2.0), [False] * 4, [0.3, 0.6, 1.2]),
        # Payouts: a round that moved statuses brings the wait back to first_s.
        (Backoff(0.5, 15.0, 2.0, reset_on_change=True), [False, False, True, False], [1.0, 2.0, 0.5]),
    ],
)
async def test_waits_between_rounds(backoff: Backoff, changes: list[bool], waits: list[float]) -> None:
    slept: list[float] = []
    rounds = iter(changes)
    done = {"n": 0}

    async def refresh() -> bool:
        done["n"] += 1
        return next(rounds)

    async def sleep(s: float) -> None:
        slept.append(s)

    progress = await poll_until(refresh, lambda: done["n"] == len(changes), 60, backoff, sleep=sleep)
    assert slept == pytest.approx(waits)
    assert progress.rounds == len(changes) and not progress.deadline_reached


async def test_stops_at_the_deadline_and_never_waits_past_it() -> None:
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    async def refresh() -> None:
        return None

    progress = await poll_until(refresh, lambda: False, 0.0, Backoff(5, 5, wait_first=True), sleep=sleep)
    assert progress.deadline_reached and progress.rounds == 0 and slept == []


async def test_nothing_to_do_makes_no_call() -> None:
    async def refresh() -> None:
        raise AssertionError("no round when everything is final")

    progress = await poll_until(refresh, lambda: True, 10, Backoff(1, 1))
    assert progress.rounds == 0 and not progress.deadline_reached
