"""The payout poll reads again when the payouts still moving should be final, judged by how long the ones
already final took, instead of waiting out its back-off (virtual clock, a scripted transaction list)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from payops.tasks.payouts.poll_loop import Backoff
from payops.tasks.payouts.polling import PayoutState, poll_until_final

T0 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


class Listing:
    """Payouts created at ``created[ref]`` seconds, final ``settle_s`` later (``completed_at`` then): listed
    by creation time, each read costs ``read_s`` of the virtual clock."""

    def __init__(self, created: dict[str, float], settle_s: float, clock: list[float], read_s: float) -> None:
        self.created, self.settle_s, self.clock, self.read_s = created, settle_s, clock, read_s
        self.transactions = SimpleNamespace(list=self.list)
        self.reads: list[float] = []

    def status(self, ref: str) -> str:
        return "delivered" if self.clock[0] >= self.created[ref] + self.settle_s else "dispatching"

    async def list(self, *, kind: str, from_: datetime, to: datetime, limit: int, cursor: str | None):
        self.reads.append(self.clock[0])
        self.clock[0] += self.read_s
        items = []
        for ref, at in self.created.items():
            created_at = T0 + timedelta(seconds=at)
            if not from_ <= created_at < to:
                continue
            final = self.status(ref) == "delivered"
            done = T0 + timedelta(seconds=at + self.settle_s) if final else None
            items.append(
                SimpleNamespace(
                    reference=ref,
                    status=self.status(ref),
                    fee=None,
                    failure_reason=None,
                    completed_at=done,
                    created_at=created_at,
                )
            )
        return SimpleNamespace(items=items, next_cursor="")


async def _poll(created: dict[str, float], settle_s: float, start_s: float, backoff: Backoff, read_s=0.01):
    clock = [start_s]

    async def sleep(s: float) -> None:
        clock[0] += s

    service = Listing(created, settle_s, clock, read_s)
    states = {r: PayoutState(r, "accepted", created_at=T0 + timedelta(seconds=t)) for r, t in created.items()}
    result = await poll_until_final(
        service, states, deadline_s=900, backoff=backoff, sleep=sleep, clock=lambda: clock[0]
    )
    return result, clock[0], service


# Batches created over 0.2 s, each final 1.5 s after its creation: the last at 1.7 s. The poll starts as the
# last answer comes back.
BATCHES = {f"b{i}": i * 0.02 for i in range(11)}


async def test_once_some_payouts_are_final_the_poll_reads_when_the_last_should_be() -> None:
    # A back-off that reads at 1.6 s (the first batches final, the last not) and then not before 3.2 s.
    slow = Backoff(first_s=1.4, max_s=60, growth=1.0, reset_on_change=False)
    result, ended, service = await _poll(BATCHES, settle_s=1.5, start_s=0.2, backoff=slow)
    assert result.pending == [] and all(s.status == "delivered" for s in result.states.values())
    assert 1.6 < service.reads[-2] < 1.7  # the back-off's read saw the first batches final
    assert 1.7 <= service.reads[-1] <= 1.8  # then one read when the last should be final, not at 3.2 s
    assert ended == pytest.approx(service.reads[-1] + 0.01)


async def test_before_any_payout_is_final_the_back_off_decides_alone() -> None:
    slow = Backoff(first_s=2.0, max_s=60, growth=1.0, reset_on_change=False)
    result, ended, service = await _poll(BATCHES, settle_s=1.5, start_s=0.2, backoff=slow)
    # first read at 0.2 s (nothing final), the next one a whole back-off step later: all final by then
    assert service.reads == pytest.approx([0.2, 2.21]) and result.pending == []


async def test_payouts_slower_than_the_ones_seen_cost_one_early_read_then_the_back_off_goes_on() -> None:
    # b0 settles in 1.5 s; "late" (created with the last batch) takes 4 s: the read expected for it at about
    # 1.72 s finds it moving, and the poll does not read again and again until it is final.
    created = {"b0": 0.0, "b9": 0.18, "late": 0.2}
    clock_settle = {"b0": 1.5, "b9": 1.5, "late": 4.0}

    class Uneven(Listing):
        def status(self, ref: str) -> str:
            final = self.clock[0] >= self.created[ref] + clock_settle[ref]
            return "delivered" if final else "dispatching"

    clock = [0.2]

    async def sleep(s: float) -> None:
        clock[0] += s

    service = Uneven(created, 1.5, clock, 0.01)
    states = {r: PayoutState(r, "accepted", created_at=T0 + timedelta(seconds=t)) for r, t in created.items()}
    backoff = Backoff(first_s=1.4, max_s=60, growth=1.0, reset_on_change=False)
    result = await poll_until_final(
        service, states, deadline_s=900, backoff=backoff, sleep=sleep, clock=lambda: clock[0]
    )
    assert result.pending == []
    # 0.2 s, 1.61 s (b0 final), 1.72 s (as expected: b9 final, "late" not), then the back-off's steps
    assert service.reads == pytest.approx([0.2, 1.61, 1.72, 3.13, 4.54])
