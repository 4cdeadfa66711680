"""One request rate shared by every flow run and worker, at the service's pace.

Two ways to pace requests, and how they combine:

* Where the Prefect server has a global concurrency limit named `payments-api` with a slot decay (its decay is
  requests per second), every API request acquires one slot of it, so all workers together stay under the
  operator's fixed rate. A 429 still pauses this process until its `Retry-After` has passed (the service's
  word wins over the configured rate), but the rate itself is the operator's: it is not adapted.
* Where none is configured, `AdaptiveRate` finds the service's pace by itself (AIMD, as TCP does): it starts
  low, doubles every quarter second while it is the bottleneck, and after the first 429 grows additively;
  each 429 pauses every request of the process until `Retry-After` has passed and cuts the rate. It never
  goes above `ceiling` (the run's `rate_limit_per_s`). Each process adapts on its own; many workers sharing
  one credential should use the global limit, which is why that path stays.

The local limiter is hand-rolled on purpose: a token bucket under AIMD is a few dozen lines of asyncio, no
library here paces asyncio requests adaptively from a response signal, and Prefect's own limiter is the shared
path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

import httpx
from payops.connectors.payments import parse_retry_after
from payops.tasks.runtime.inflight import DEFAULT_CAP, InFlight, InFlightWindow, RoundTrip
from payops.tasks.runtime.service_pace import Pace
from pydantic import BaseModel, ConfigDict

LIMIT_NAME = "payments-api"
START_PER_S = 50.0
"""Where a rate that knows nothing of the service starts (`AdaptiveRate`), and the most requests its bucket
lets go at once until the first 429: one second's worth at this rate."""
_EPSILON_S = 1e-6  # clocks with microsecond steps: a sleep shorter than this would never end the wait
log = logging.getLogger(__name__)


class Limiter(Protocol):
    source: str

    async def acquire(self) -> None: ...

    def observe(self, status: int, retry_after_s: float | None, round_trip_s: float | None = None) -> None:
        """Learn from one response (429s pause and slow the limiter); `round_trip_s`: the API's answer
        time, when it counts as one (`_is_round_trip`)."""

    @property
    def rate_per_s(self) -> float | None:
        """The rate the limiter allows now (None when it is not its own to tell)."""

    @property
    def pace_per_s(self) -> float | None:
        """The most requests a second it lets through now: its rate, or the global limit's (None: unknown)."""


class _RetryAfterGate:
    """Holds every request of the process until the latest 429's `Retry-After` has passed."""

    def __init__(self, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]) -> None:
        self._clock = clock
        self._sleep = sleep
        self.paused_until = 0.0

    def pause(self, retry_after_s: float | None) -> float:
        """Pause for `Retry-After` (1 s when the header is missing or unreadable); returns the end."""
        self.paused_until = max(self.paused_until, self._clock() + (retry_after_s if retry_after_s else 1.0))
        return self.paused_until

    async def wait(self) -> bool:
        """Sleep until the pause is over; True if it had to."""
        waited = False
        while (left := self.paused_until - self._clock()) > _EPSILON_S:
            waited = True
            await self._sleep(left)
        return waited


class AdaptiveRate:
    """AIMD request rate: as fast as the service answers, slower after each 429, never above `ceiling`.

    * Slow start: from `start` (`START_PER_S`, or the pace the last run learned: `tasks.runtime.service_pace`;
      ``slow_start=False`` when that pace came from the service's 429s) the rate doubles every `doubling_s`
      that the limiter is the bottleneck (requests waited for a token), until the first 429: 50 to 1000 per
      second in about a second. A slower
      ramp makes a cold pre-flight wait; a faster one overshoots a limited service more before its first 429
      (docs/performance.md, *Request rate*). Over a long round trip it doubles no faster than every
      `doubling_round_trips` of it: the first 429 comes back a round trip after the service's limit was met,
      and by then about rate x round trip requests are in flight, each refused; a slower ramp meets the limit
      at a lower rate.
    * Then it grows by `increase` (a share of the rate at the last cut) per second of such use.
    * A 429 pauses every request until its `Retry-After` has passed and multiplies the rate by `decrease`
      (`slow_start_decrease` for the first one, which typically overshot by up to 2x), or cuts it down to
      the answers per second since the last 429 (its pause included: a service's bucket refills during it)
      when those were fewer, but never below `deepest_cut` (`slow_start_deepest_cut`) of the rate. 429s
      answering requests sent before the pause ended are the same congestion event: one cut per event.
    * Requests are paced by a bucket holding at most `burst_s` seconds of requests, full at the start: a
      handful of concurrent reads after an idle moment (a poll round, the pre-flight's first quotes) go at
      once instead of one every 1/rate seconds; a sustained stream is paced evenly. Until the first 429 it
      holds at least one second at `start` (so a poll round's list reads go at once, not one every
      1/rate seconds); once
      the service has said 429, only `burst_s` of the rate. A rate that starts higher (a remembered pace)
      still starts with at most one second at `START_PER_S`. After a pause the bucket starts empty, so a
      pause's end is no storm.
    """

    source = "local"

    def __init__(
        self,
        ceiling: float,
        *,
        start: float = START_PER_S,
        slow_start: bool = True,
        floor: float = 1.0,
        increase: float = 0.03,
        decrease: float = 0.85,
        slow_start_decrease: float = 0.5,
        deepest_cut: float = 0.5,
        slow_start_deepest_cut: float = 0.25,
        doubling_s: float = 0.25,
        doubling_round_trips: float = 6.0,
        burst_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if ceiling <= 0:
            raise ValueError("ceiling must be positive")
        self.ceiling = ceiling
        self.floor = min(floor, ceiling)
        self.rate = min(start, ceiling)
        self.started_at = self.rate
        self.start_burst = min(self.rate, START_PER_S)  # until the first 429
        self.rate_max = self.rate
        self.increase = increase
        self.decrease = decrease
        self.slow_start_decrease = slow_start_decrease
        self.deepest_cut = deepest_cut
        self.slow_start_deepest_cut = slow_start_deepest_cut
        self._answered = 0  # answers (not 429) since the last congestion event
        self._counted_from: float | None = None
        self.doubling_s = doubling_s
        self.doubling_round_trips = doubling_round_trips
        self.round_trip = RoundTrip(clock=clock)
        self.slow_start = slow_start
        self.throttled = 0
        self.cuts = 0
        self._step = self.rate * increase
        self._clock = clock
        self._sleep = sleep
        self._gate = _RetryAfterGate(clock, sleep)
        self.burst_s = burst_s
        self._tokens = self._capacity()
        self._stamp = self._grown = clock()
        self._saturated = False
        self._event_end = 0.0  # requests sent before this belong to the last congestion event
        self._lock = asyncio.Lock()

    @property
    def rate_per_s(self) -> float | None:
        return self.rate

    @property
    def pace_per_s(self) -> float | None:
        return self.rate

    @property
    def learned(self) -> Pace | None:
        """What this rate learned of the service, for the next run (`tasks.runtime.service_pace`): after a
        429, the rate its cuts arrived at; else the highest rate it was driven above where it started; None
        when it was never driven."""
        if self.cuts:
            return Pace(self.rate, limited=True)
        if self.rate_max > self.started_at:
            return Pace(self.rate_max, limited=False)
        return None

    @property
    def doubling_period_s(self) -> float:
        """How often slow start doubles: every `doubling_s`, and no faster than every `doubling_round_trips`
        of the service's round trip."""
        rtt = self.round_trip.seconds
        return max(self.doubling_s, self.doubling_round_trips * rtt) if rtt else self.doubling_s

    def _cut(self, now: float) -> float:
        """The rate after a congestion event: `decrease` (`slow_start_decrease` at the first) times the rate,
        or less, down to `deepest_cut` (`slow_start_deepest_cut`) of it, where the service answered fewer
        since the last event (its pause included, when the service's own bucket refilled)."""
        factor, deepest = (
            (self.slow_start_decrease, self.slow_start_deepest_cut)
            if self.slow_start
            else (self.decrease, self.deepest_cut)
        )
        cut = self.rate * factor
        span = now - self._counted_from if self._counted_from is not None else 0.0
        if span >= 0.5:
            cut = max(self.rate * deepest, min(cut, self._answered / span))
        return cut

    def _capacity(self) -> float:
        floor = self.start_burst if self.slow_start else 1.0
        return max(floor, self.rate * self.burst_s)

    async def acquire(self) -> None:
        async with self._lock:
            while True:
                if await self._gate.wait():
                    self._tokens = 0.0  # resume paced, not with a saved-up burst
                    self._stamp = self._clock()
                now = self._clock()
                self._tokens = min(self._capacity(), self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1 - _EPSILON_S:
                    self._tokens -= 1
                    return
                self._saturated = True
                await self._sleep((1 - self._tokens) / self.rate)

    def observe(self, status: int, retry_after_s: float | None, round_trip_s: float | None = None) -> None:
        now = self._clock()
        if round_trip_s is not None:
            self.round_trip.observe(round_trip_s)
        if status == 429:
            self.throttled += 1
            end = self._gate.pause(retry_after_s)
            if now >= self._event_end:
                self.rate = max(self.floor, self._cut(now))
                self._step = max(self.rate * self.increase, 0.5)
                self.slow_start = False
                self.cuts += 1
                self._answered, self._counted_from = 0, now
            self._event_end = end
            self._grown = end
            self._saturated = False
            return
        self._answered += 1
        if self._counted_from is None:
            self._counted_from = now
        if now < self._event_end:
            return
        dt = now - self._grown
        if dt < 0.05:
            return
        self._grown = now
        if not self._saturated:  # the caller, not the limiter, set the pace: no evidence for more
            return
        self._saturated = False
        if self.slow_start:
            doubling = self.doubling_period_s
            grown = self.rate * 2 ** (min(dt, doubling) / doubling)
        else:
            grown = self.rate + self._step * min(dt, 1.0)
        self.rate = min(self.ceiling, grown)
        self.rate_max = max(self.rate_max, self.rate)


class PrefectRateLimit:
    """Prefect global concurrency limit used as a rate limit (slots decay at the limit's rate)."""

    source = "prefect"

    def __init__(self, name: str = LIMIT_NAME, limit_per_s: float | None = None) -> None:
        self.name = name
        self.limit_per_s = limit_per_s  # the whole deployment's rate (the limit's slot decay)
        self._gate = _RetryAfterGate(time.monotonic, asyncio.sleep)

    async def acquire(self) -> None:
        from prefect.concurrency.asyncio import rate_limit

        await self._gate.wait()
        await rate_limit(self.name, occupy=1, strict=True)

    def observe(self, status: int, retry_after_s: float | None, round_trip_s: float | None = None) -> None:
        """The operator's rate stays; a 429 pauses this process until `Retry-After` has passed."""
        if status == 429:
            self._gate.pause(retry_after_s)

    @property
    def rate_per_s(self) -> float | None:
        return None

    @property
    def pace_per_s(self) -> float | None:
        return self.limit_per_s


async def resolve_limiter(fallback_per_s: float, name: str = LIMIT_NAME, pace: Pace | None = None) -> Limiter:
    """Prefect's limit when the server has an active one with a slot decay, else an adaptive rate whose
    ceiling is `fallback_per_s`, starting at ``pace`` (what an earlier run learned) when known."""
    try:
        from prefect.client.orchestration import get_client

        async with get_client() as client:
            limit = await client.read_global_concurrency_limit_by_name(name)
        if limit.active and (limit.slot_decay_per_second or 0) > 0:
            return PrefectRateLimit(name, limit.slot_decay_per_second)
        log.info("global concurrency limit %r is inactive or has no slot decay; using a local limiter", name)
    except Exception as exc:  # noqa: BLE001 - a missing limit or no server both mean: limit locally
        log.info(
            "no usable global concurrency limit %r (%s); using a local limiter", name, type(exc).__name__
        )
    return adaptive_rate(fallback_per_s, pace)


def adaptive_rate(ceiling: float, pace: Pace | None) -> AdaptiveRate:
    """An `AdaptiveRate` under ``ceiling`` starting at ``pace`` when known (no slow start past a pace the
    service's 429s set), else at `START_PER_S`."""
    if pace is None:
        return AdaptiveRate(ceiling)
    start = pace.per_s if pace.limited else max(pace.per_s, START_PER_S)
    return AdaptiveRate(ceiling, start=start, slow_start=not pace.limited)


class RateLimitFigures(BaseModel):
    """What the request-rate limiter cost a phase, as a run's summary reports it (`LimiterStats.figures`)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    acquires: int = 0
    wait_ms_avg: float = 0.0
    request_ms_avg: float = 0.0
    throttled_429: int = 0
    rate_reached_per_s: float | None = None
    achieved_per_s: float | None = None
    in_flight_max: int = 0
    latency_ms_min: float | None = None


@dataclass
class LimiterStats:
    """What the limiter cost: acquisitions, the time spent waiting for them, 429s and the rate reached."""

    source: str
    acquires: int = 0
    wait_s: float = 0.0
    request_s: float = 0.0
    throttled: int = 0
    rate_max_per_s: float | None = None
    first_s: float | None = None
    last_s: float | None = None
    in_flight_max: int = 0
    latency_ms_min: float | None = None

    def record(
        self, t0: float, t1: float, t2: float, status: int | None, rate: float | None, round_trip: bool
    ) -> None:
        """One request: asked for a slot at `t0`, got it at `t1`, answered at `t2` with `status`;
        `round_trip`: its time counts as the API's round trip (`_is_round_trip`)."""
        self.acquires += 1
        self.wait_s += t1 - t0
        self.request_s += t2 - t1
        self.throttled += status == 429
        if round_trip:
            ms = (t2 - t1) * 1000
            self.latency_ms_min = ms if self.latency_ms_min is None else min(self.latency_ms_min, ms)
        if rate is not None:
            self.rate_max_per_s = max(rate, self.rate_max_per_s or 0.0)
        self.first_s = t1 if self.first_s is None else min(self.first_s, t1)
        self.last_s = t2 if self.last_s is None else max(self.last_s, t2)

    def record_in_flight(self, active: int) -> None:
        """Requests in flight as one more is sent."""
        self.in_flight_max = max(self.in_flight_max, active)

    @classmethod
    def combine(cls, parts: list[LimiterStats]) -> LimiterStats:
        """One figure for several tasks' transports."""
        sources = ",".join(sorted({p.source for p in parts})) or "none"
        rates = [p.rate_max_per_s for p in parts if p.rate_max_per_s is not None]
        firsts = [p.first_s for p in parts if p.first_s is not None]
        lasts = [p.last_s for p in parts if p.last_s is not None]
        return cls(
            sources,
            sum(p.acquires for p in parts),
            sum(p.wait_s for p in parts),
            sum(p.request_s for p in parts),
            sum(p.throttled for p in parts),
            max(rates) if rates else None,
            min(firsts) if firsts else None,
            max(lasts) if lasts else None,
            max((p.in_flight_max for p in parts), default=0),
            min((p.latency_ms_min for p in parts if p.latency_ms_min is not None), default=None),
        )

    @property
    def achieved_per_s(self) -> float | None:
        """Requests per second from the first slot to the last answer (None for fewer than two requests)."""
        if self.acquires < 2 or self.first_s is None or self.last_s is None or self.last_s <= self.first_s:
            return None
        return self.acquires / (self.last_s - self.first_s)

    def figures(self) -> RateLimitFigures:
        """These stats as a summary reports them: averages in milliseconds, rates per second, rounded."""
        avg_wait = self.wait_s / self.acquires if self.acquires else 0.0
        avg_req = self.request_s / self.acquires if self.acquires else 0.0
        achieved = self.achieved_per_s
        return RateLimitFigures(
            source=self.source,
            acquires=self.acquires,
            wait_ms_avg=round(avg_wait * 1000, 2),
            request_ms_avg=round(avg_req * 1000, 2),
            throttled_429=self.throttled,
            rate_reached_per_s=round(self.rate_max_per_s, 1) if self.rate_max_per_s else None,
            achieved_per_s=round(achieved, 1) if achieved else None,
            in_flight_max=self.in_flight_max,
            latency_ms_min=round(self.latency_ms_min, 1) if self.latency_ms_min is not None else None,
        )


def _is_round_trip(request: httpx.Request, status: int | None) -> bool:
    """An answer from the API itself (its request carries the access token) whose time sizes the window.
    The token endpoint may be another host and answers otherwise; a 429 is a refusal, not the work's time."""
    bearer = request.headers.get("Authorization", "").startswith("Bearer ")
    return bearer and status is not None and status != 429


_STATS_SCOPE: ContextVar[LimiterStats | None] = ContextVar("payops_limiter_stats", default=None)


class RateLimitedTransport(httpx.AsyncBaseTransport):
    """Acquires one limiter slot before every request it sends (retries included), and measures the round
    trips that size the requests its callers keep in flight (`in_flight`)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, limiter: Limiter) -> None:
        self.inner = inner
        self.limiter = limiter
        self.window = InFlightWindow()
        self.active = 0
        self._stats = LimiterStats(source=limiter.source)

    def in_flight(self, cap: int = DEFAULT_CAP) -> InFlight:
        """A gate keeping about the limiter's pace × the measured round trip of requests in flight, at most
        `cap` (`tasks.runtime.inflight`)."""
        return InFlight(self.window, lambda: self.limiter.pace_per_s, cap)

    @property
    def stats(self) -> LimiterStats:
        """What the limit cost: in the open `counting()` scope if any, else since creation."""
        return _STATS_SCOPE.get() or self._stats

    @contextmanager
    def counting(self) -> Iterator[LimiterStats]:
        """Tally this context's acquisitions apart (tasks sharing one transport)."""
        token = _STATS_SCOPE.set(LimiterStats(source=self.limiter.source))
        try:
            yield self.stats
        finally:
            _STATS_SCOPE.reset(token)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        t0 = time.perf_counter()
        await self.limiter.acquire()
        t1 = time.perf_counter()
        status: int | None = None
        self.active += 1
        scopes = {id(s): s for s in (self._stats, _STATS_SCOPE.get()) if s is not None}.values()
        for stats in scopes:
            stats.record_in_flight(self.active)
        try:
            response = await self.inner.handle_async_request(request)
            status = response.status_code
            round_trip_s = time.perf_counter() - t1 if _is_round_trip(request, status) else None
            self.limiter.observe(status, parse_retry_after(response.headers.get("Retry-After")), round_trip_s)
            return response
        finally:
            t2 = time.perf_counter()
            self.active -= 1
            round_trip = _is_round_trip(request, status)
            if round_trip:
                self.window.observe(t2 - t1)
            rate = self.limiter.rate_per_s
            for stats in scopes:
                stats.record(t0, t1, t2, status, rate, round_trip)

    async def aclose(self) -> None:
        await self.inner.aclose()
