"""AIMD request rate against the emulator's per-credential rate limit, on a virtual clock.

The emulator and the limiter read one `ManualClock`; the limiter's sleeps move it, and every request costs
5 ms of it, so a minute of traffic runs in a second and the figures do not depend on this machine's load.
"""

from __future__ import annotations

import httpx
import pytest
from payops.sandbox import SandboxConfig, create_app
from payops.sandbox.clock import ManualClock
from payops.tasks.runtime.ratelimit import AdaptiveRate, RateLimitedTransport

from tests.sandbox.sandbox_support import START, Api

REQUEST_S = 0.005


class Traffic:
    """One sender, paced by an `AdaptiveRate`, against an emulator limited to `service_rate` per second."""

    def __init__(self, service_rate: float, ceiling: float = 1000.0) -> None:
        self.clock = ManualClock(START)
        app = create_app(SandboxConfig(clock=self.clock, rate_limit_per_s=service_rate))
        self.limiter = AdaptiveRate(ceiling, clock=self.now, sleep=self.sleep)
        self.transport = RateLimitedTransport(httpx.ASGITransport(app=app), self.limiter)
        self.sent: list[tuple[float, int, float]] = []  # (sent at, status, Retry-After)

    def now(self) -> float:
        return self.clock.now().timestamp() - START.timestamp()

    async def sleep(self, seconds: float) -> None:
        self.clock.advance(max(1e-6, seconds))  # the clock moves in microseconds

    async def run(self, seconds: float) -> None:
        async with httpx.AsyncClient(transport=self.transport, base_url="http://s") as client:
            api = Api(client)
            await api.login()
            while self.now() < seconds:
                r = await api.get("/v1/wallet")
                self.clock.advance(REQUEST_S)
                retry_after = float(r.headers.get("Retry-After", 0))
                self.sent.append((self.now() - REQUEST_S, r.status_code, retry_after))

    def ok_rate(self, start: float, end: float) -> float:
        return sum(1 for t, s, _ in self.sent if start <= t < end and s == 200) / (end - start)


@pytest.fixture(scope="module")
async def limited() -> Traffic:
    """40 virtual seconds against a service that allows 50 requests per second (burst 50)."""
    traffic = Traffic(service_rate=50)
    await traffic.run(40)
    return traffic


async def test_converges_on_the_service_rate_with_few_429s(limited: Traffic) -> None:
    traffic = limited
    throttled = sum(1 for _, s, _ in traffic.sent if s == 429)
    assert throttled >= 1  # it did probe the service's limit
    assert throttled / len(traffic.sent) <= 0.05
    assert traffic.ok_rate(10, 40) >= 40  # most of the service's 50/s, pauses included
    assert 30 <= traffic.limiter.rate <= 65
    # slow start doubles every 0.25 s while the service's burst of 50 lasts: about 4.6x its rate before the
    # first 429, then halved and cut by 15% per congestion event
    assert traffic.limiter.rate_max <= 250


async def test_goes_as_fast_as_an_unlimited_service_allows_up_to_the_ceiling() -> None:
    traffic = Traffic(service_rate=10_000, ceiling=100)
    await traffic.run(6)
    assert traffic.limiter.rate == 100 and traffic.limiter.throttled == 0
    assert 90 <= traffic.ok_rate(3, 6) <= 105


async def test_finds_an_unlimited_services_pace_within_a_second() -> None:
    # One sender at 5 ms a request can use 200/s; from 50/s the rate doubles every 0.25 s of saturation.
    traffic = Traffic(service_rate=10_000, ceiling=150)
    await traffic.run(1.0)
    assert traffic.limiter.rate == 150 and traffic.limiter.throttled == 0
    assert traffic.ok_rate(0.75, 1.0) >= 130


async def test_honours_retry_after_and_resumes_without_a_storm(limited: Traffic) -> None:
    traffic = limited
    pauses = [(t, ra) for t, s, ra in traffic.sent if s == 429]
    assert pauses
    for t, retry_after in pauses:
        assert retry_after >= 1
        inside = [u for u, _, _ in traffic.sent if t < u < t + retry_after]
        assert not inside, f"requests sent {inside[:3]} during the Retry-After of a 429 at {t:.3f}"
        after = [u for u, _, _ in traffic.sent if t + retry_after <= u < t + retry_after + 0.1]
        assert len(after) <= 0.1 * traffic.limiter.rate_max + 3  # paced after the pause, no burst


async def test_a_burst_goes_at_once_until_the_first_429_then_only_a_fifth_of_a_second() -> None:
    slept: list[float] = []
    now = [0.0]

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = AdaptiveRate(1000, clock=lambda: now[0], sleep=sleep)
    for _ in range(50):  # a poll round of 50 list reads: as many as the old fixed 50/s bucket let go at once
        await limiter.acquire()
    assert slept == []
    await limiter.acquire()
    assert slept  # the 51st waits for a token
    limiter.observe(429, 1.0)
    now[0] += 60  # long idle after the pause: the bucket refills, but now holds 0.2 s of the cut rate
    slept.clear()
    for _ in range(int(limiter.rate * limiter.burst_s) + 1):
        await limiter.acquire()
    assert len(slept) == 1 and limiter.rate == 25


class Virtual:
    """A virtual clock and sleep for a limiter fed answers by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def _saturated_second(limiter: AdaptiveRate, v: Virtual, round_trip_s: float | None) -> None:
    """One virtual second of a sender that always waits for tokens, each answer after `round_trip_s`."""
    end = v.now + 1.0
    while v.now < end:
        await limiter.acquire()
        limiter.observe(200, None, round_trip_s)


@pytest.mark.parametrize(
    ("round_trip_s", "doubling_s"),
    [(None, 0.25), (0.001, 0.25), (0.02, 0.25), (0.05, 0.3), (0.1, 0.6), (0.3, 1.8)],
)
async def test_slow_start_doubles_no_faster_than_every_six_round_trips(
    round_trip_s: float | None, doubling_s: float
) -> None:
    # A 429 finds about rate x round trip requests in flight: over a long round trip, a ramp that doubles
    # every 0.25 s meets a service's limit at several times its rate, and every one in flight is refused.
    v = Virtual()
    limiter = AdaptiveRate(100_000, clock=v.clock, sleep=v.sleep)
    await _saturated_second(limiter, v, round_trip_s)
    assert limiter.doubling_period_s == pytest.approx(doubling_s)
    assert limiter.rate == pytest.approx(50 * 2 ** (1.0 / doubling_s), rel=0.25)


async def test_a_429_cuts_to_what_the_service_answered_since_the_last_one_within_bounds() -> None:
    v = Virtual()
    limiter = AdaptiveRate(1000, clock=v.clock, sleep=v.sleep)
    limiter.rate, limiter.slow_start = 400.0, False
    limiter.observe(429, 1.0)  # an event: from here the answers are counted
    assert limiter.rate == pytest.approx(400 * 0.85)
    v.now += 1.0  # the pause; the service's bucket refills meanwhile
    for _ in range(150):  # 150 answers over the next second: 75 a second since the last 429
        v.now += 1 / 150
        limiter.observe(200, None, 0.1)
    limiter.observe(429, 1.0)
    assert limiter.rate == pytest.approx(400 * 0.85 * 0.5)  # never more than halved at once
    v.now += 1.0
    for _ in range(260):
        v.now += 1 / 260
        limiter.observe(200, None, 0.1)
    limiter.observe(429, 1.0)
    assert limiter.rate == pytest.approx(130)  # 260 answers in 2 s: the service's pace, not 85% of 170


async def test_the_first_429_cuts_to_what_the_service_answered_not_half_an_overshoot() -> None:
    v = Virtual()
    limiter = AdaptiveRate(1000, clock=v.clock, sleep=v.sleep)
    for _ in range(240):  # 120 answers a second for 2 s while slow start climbed to 400
        v.now += 1 / 120
        limiter.observe(200, None, 0.1)
    limiter.rate = 400.0
    limiter.observe(429, 1.0)
    assert limiter.rate == pytest.approx(240 / (2 - 1 / 120), rel=0.01)  # not 200
    assert not limiter.slow_start
