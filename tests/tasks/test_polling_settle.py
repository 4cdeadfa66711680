"""The payout poll ends at the settle window when only payouts waiting for a person remain, tells each failure
once as it happens, and rides out a failed round until its deadline (virtual clock, scripted service)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from payops.connectors.payments import InternalServerError
from payops.tasks.payouts.polling import PayoutState, poll_until_final


class Service:
    """Payout statuses over (virtual) time: ``script[ref]`` lists ``(from_second, status)``."""

    def __init__(self, script: dict[str, list[tuple[float, str]]], clock: list[float]) -> None:
        self.script, self.clock, self.gets, self.down_until = script, clock, 0, -1.0
        self.payouts = SimpleNamespace(get=self.get)

    async def get(self, ref: str) -> SimpleNamespace:
        self.gets += 1
        if self.clock[0] < self.down_until:
            raise InternalServerError("internal server error", status=500, code="internal", request_id=None)
        status = [s for t, s in self.script[ref] if t <= self.clock[0]][-1]
        reason = "account_not_found" if status == "failed" else None
        return SimpleNamespace(
            reference=ref, status=status, fee=None, failure_reason=reason, completed_at=None, created_at=None
        )


def _run(script: dict[str, list[tuple[float, str]]], **kw):
    clock = [0.0]

    async def sleep(s: float) -> None:
        clock[0] += s

    service = Service(script, clock)
    states = {ref: PayoutState(ref, "accepted") for ref in script}
    told: list[tuple[float, str]] = []

    async def on_failed(newly: list[PayoutState]) -> None:
        told.extend((clock[0], s.reference) for s in newly)

    async def go():
        return await poll_until_final(
            service, states, sleep=sleep, clock=lambda: clock[0], on_failed=on_failed, **kw
        )

    return go, clock, service, told


async def test_a_held_payout_ends_the_run_after_the_settle_window_not_the_deadline() -> None:
    script = {
        "A": [(0, "accepted"), (2, "delivered")],
        "B": [(0, "accepted"), (3, "failed")],
        "H": [(0, "accepted"), (1, "held")],
    }
    go, clock, _service, told = _run(script, deadline_s=900, settle_window_s=10)
    result = await go()
    assert result.settle_window_reached and not result.deadline_reached
    assert result.pending == ["H"] and result.awaiting_review == ["H"] and result.failed == ["B"]
    assert 10 <= clock[0] <= 13.5  # held seen at ~1 s: ends one settle window later, not at 900 s
    assert [ref for _t, ref in told] == ["B"] and told[0][0] < 5  # the failure told when seen, once


async def test_without_a_settle_window_a_held_payout_is_waited_for_until_the_deadline() -> None:
    go, clock, _service, _told = _run({"H": [(0, "held")]}, deadline_s=60, settle_window_s=None)
    result = await go()
    assert result.deadline_reached and not result.settle_window_reached and clock[0] == pytest.approx(60)


async def test_a_payout_leaving_review_restarts_nothing_and_ends_final() -> None:
    script = {"R": [(0, "in_review"), (4, "delivered")], "A": [(0, "accepted"), (1, "delivered")]}
    go, _clock, _service, _told = _run(script, deadline_s=900, settle_window_s=10)
    result = await go()
    assert result.pending == [] and not result.settle_window_reached


async def test_a_round_that_fails_is_read_again_and_the_deadline_still_holds() -> None:
    go, clock, service, _told = _run({"S": [(0, "dispatching")]}, deadline_s=30, settle_window_s=5)
    service.down_until = 1e9  # the service answers 500 to every read (the client gave up each time)
    result = await go()
    assert result.deadline_reached and result.failed_rounds == result.rounds > 1
    assert clock[0] == pytest.approx(30) and result.states["S"].status == "accepted"
