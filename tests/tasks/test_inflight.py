"""Requests in flight sized by the service (Little's law): the window's arithmetic on a virtual clock, the
gate following it as the pace moves, and the pre-flight and the poll keeping that many in flight."""

from __future__ import annotations

import asyncio
import math
from decimal import Decimal
from types import SimpleNamespace

import httpx
import pytest
from payops.connectors.payments import PaymentsClient, PaymentsSettings
from payops.sandbox import SandboxConfig, create_app
from payops.sandbox.engine.party_lookups import holder_name
from payops.tasks.payouts.polling import PayoutState, poll_until_final
from payops.tasks.payouts.preflight import run_preflight
from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.runtime.inflight import MAX_IN_FLIGHT, InFlight, InFlightWindow
from payops.tasks.runtime.ratelimit import AdaptiveRate, RateLimitedTransport

from tests.connectors.payments_emulator import DEMO_ID, DEMO_SECRET


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("pace", "latencies", "cap", "size"),
    [
        (1000.0, [], 128, 16),  # before any answer: the start
        (1000.0, [], 4, 4),  # ... within the cap
        (50.0, [0.1], 128, 10),  # 50/s over 100 ms, twice: 10
        (400.0, [0.1], 128, 80),
        (1000.0, [0.1], 128, 128),  # 200 wanted, the cap holds
        (5000.0, [0.1], 1000, MAX_IN_FLIGHT),  # never more than the connection pool
        (1000.0, [0.001], 128, 8),  # loopback: the floor
        (1000.0, [0.001], 3, 3),  # a cap under the floor wins
        (None, [0.1], 64, 64),  # a limiter that cannot tell its pace: the cap
        (100.0, [0.1, 0.3, 0.5], 128, 20),  # queueing adds latency; the path's own round trip counts
        (100.0, [0.5, 0.3, 0.1], 128, 20),
    ],
)
def test_window_is_pace_times_round_trip_with_headroom(
    pace: float | None, latencies: list[float], cap: int, size: int
) -> None:
    window = InFlightWindow(clock=Clock())
    for latency in latencies:
        window.observe(latency)
    assert window.size(pace, cap) == size


def test_the_round_trip_is_the_least_of_the_last_ten_seconds_and_survives_an_idle_pause() -> None:
    clock = Clock()
    window = InFlightWindow(clock=clock)
    window.observe(0.1)
    clock.now = 5.0
    window.observe(0.3)  # queueing behind our own requests
    assert window.latency_s == 0.1
    clock.now = 10.5
    assert window.latency_s == 0.3  # the 0.1 is older than 10 s: the path may have changed
    clock.now = 3600.0  # an approval pause: the last estimate stays
    assert window.latency_s == 0.3
    window.observe(0.2)
    assert window.latency_s == 0.2


class Held:
    """Tasks holding gate slots until released, to watch admissions."""

    def __init__(self, gate: InFlight, n: int) -> None:
        self.gate = gate
        self.release = [asyncio.Event() for _ in range(n)]
        self.entered = 0
        self.tasks = [asyncio.create_task(self._one(e)) for e in self.release]

    async def _one(self, event: asyncio.Event) -> None:
        async with self.gate:
            self.entered += 1
            await event.wait()

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    async def finish(self) -> None:
        for e in self.release:
            e.set()
        await asyncio.gather(*self.tasks)


async def test_the_gate_admits_what_the_pace_allows_and_follows_it_up_and_down() -> None:
    window = InFlightWindow(clock=Clock())
    window.observe(0.1)
    pace = [50.0]  # 10 in flight
    gate = InFlight(window, lambda: pace[0], cap=128)
    held = Held(gate, 60)
    await held.settle()
    assert held.entered == gate.active == 10
    pace[0] = 200.0  # the adaptive rate doubled twice: 40 in flight
    held.release[0].set()
    await held.settle()
    assert gate.active == 40 and held.entered == 41
    pace[0] = 100.0  # a 429 cut the rate: 20 in flight; releases admit nobody until under it
    for e in [e for e in held.release if not e.is_set()][:25]:
        e.set()
    await held.settle()
    assert gate.active == 20
    assert gate.peak == 40
    await held.finish()
    assert gate.active == 0 and held.entered == 60


def _payroll(numbers: range) -> list[PayoutRow]:
    """One row per number, its holder's name on it."""
    return [
        PayoutRow(
            row=k + 2,
            amount=Decimal("25.10"),
            currency="GHS",
            provider="mtn",
            destination_type="msisdn",
            destination=f"23324{i:07d}",
            payee_name=holder_name(f"23324{i:07d}"),
        )
        for k, i in enumerate(numbers)
    ]


def _settings() -> PaymentsSettings:
    return PaymentsSettings(base_url="http://sandbox.test", client_id=DEMO_ID, client_secret=DEMO_SECRET)


async def test_a_preflight_over_a_slow_network_keeps_more_reads_in_flight_than_a_fixed_sixteen() -> None:
    # 50 ms per request: 16 reads at once would cap the pre-flight at 320 a second whatever the rate allows.
    app = create_app(SandboxConfig(latency_ms=50))
    transport = RateLimitedTransport(httpx.ASGITransport(app=app), AdaptiveRate(1000))
    rows = _payroll(range(1000, 1400))
    async with PaymentsClient(_settings(), transport=transport) as client:
        gate = transport.in_flight(64)
        pf = await run_preflight(client, rows, gate=gate)
    assert pf.lookups["fresh"] == 400
    assert 16 < gate.peak <= 64
    assert transport.stats.in_flight_max <= 64 + 2  # the gate's reads and the wallet and limits reads


async def test_a_limited_pace_keeps_few_reads_in_flight() -> None:
    app = create_app(SandboxConfig(latency_ms=50))
    limiter = AdaptiveRate(100, start=100)  # 100/s over 50 ms, twice: 10
    transport = RateLimitedTransport(httpx.ASGITransport(app=app), limiter)
    async with PaymentsClient(_settings(), transport=transport) as client:
        await client.wallet.get()  # one answer: the window knows the round trip
        gate = transport.in_flight(128)
        latency = transport.window.latency_s
        assert latency is not None and latency >= 0.05
        await run_preflight(client, _payroll(range(3000, 3100)), gate=gate)
    # the round trip only falls from the first one seen (the least of the last 10 s), so the window never
    # held more than 100/s × that × 2 (a fixed bound of 128 would have let the 100 lookups go at once)
    assert gate.peak <= max(8, math.ceil(100 * 2 * latency))


async def test_the_poll_reads_as_many_at_once_as_its_gate_admits() -> None:
    clock = [0.0]
    now_active = [0]
    most = [0]

    async def get(ref: str) -> SimpleNamespace:
        now_active[0] += 1
        most[0] = max(most[0], now_active[0])
        await asyncio.sleep(0)
        now_active[0] -= 1
        return SimpleNamespace(
            reference=ref,
            status="delivered",
            fee=None,
            failure_reason=None,
            completed_at=None,
            created_at=None,
        )

    async def sleep(s: float) -> None:
        clock[0] += s

    service = SimpleNamespace(payouts=SimpleNamespace(get=get))
    states = {f"R{i}": PayoutState(f"R{i}", "accepted") for i in range(50)}
    window = InFlightWindow(clock=Clock())
    window.observe(0.1)
    gate = InFlight(window, lambda: 150.0, cap=128)  # 30 in flight
    result = await poll_until_final(
        service, states, deadline_s=60, gate=gate, sleep=sleep, clock=lambda: clock[0]
    )
    assert not result.pending
    assert most[0] == 30 == gate.peak
