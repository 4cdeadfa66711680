"""How many requests to keep in flight: the service's pace times its round trip (Little's law).

A client keeping N requests in flight over a round trip of L seconds sends at most N / L requests a second. To
go at the limiter's pace R (the adaptive rate, never above its ceiling, or the global limit's rate) it needs
about R × L in flight: fewer leave the rate unused (16 reads over 100 ms: 160 a second at most, whatever the
rate), more only queue. `InFlightWindow` keeps that figure as the requests go:

* L is the least round trip seen over the last `base_s` seconds (the path's own latency, as TCP Vegas and
  BBR take it), not an average: an average also counts the queueing that more requests in flight cause, so
  when the client's CPU or the service's workers are the bound the window would grow with its own queue up to
  the cap.
* `headroom` (2) lets the round trip grow to twice the path's before the limiter stops being the bottleneck:
  the adaptive rate keeps seeing demand, and growing, while the service keeps up; once requests queue (the
  client's CPU, the service's workers) the demand falls under the rate and neither grows further.
* R is read at every admission and release, so a 429 (which cuts the adaptive rate and pauses every request
  for its Retry-After) shrinks the window at once, and a rate that doubles widens it.
* Before the first answer: `start` in flight. Never fewer than `floor` (a loopback service answers in a
  millisecond: the client's own work then needs a few requests in flight), never more than the caller's cap
  (`preflight_concurrency`) nor `MAX_IN_FLIGHT` (the connection pool's size).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

import anyio

MAX_IN_FLIGHT = 256
"""The most requests one client keeps in flight (its connection pool holds as many connections)."""
DEFAULT_CAP = 128
"""The default cap of a run's in-flight reads (`preflight_concurrency`; the poll's reads)."""


@dataclass
class RoundTrip:
    """The least round trip of the last `base_s` seconds: the path's own latency, without the queueing."""

    base_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    _mins: deque[tuple[float, float]] = field(default_factory=deque, repr=False)
    """(time, latency) with rising latencies: the front is the least of the last `base_s` (a monotonic
    queue; the newest sample always stays, so an idle pause keeps the last estimate)."""

    def observe(self, latency_s: float) -> None:
        """One answered request's round trip (from its sending to its answer's headers)."""
        now = self.clock()
        while self._mins and self._mins[-1][1] >= latency_s:
            self._mins.pop()
        self._mins.append((now, latency_s))
        self._expire(now)

    def _expire(self, now: float) -> None:
        while len(self._mins) > 1 and self._mins[0][0] < now - self.base_s:
            self._mins.popleft()

    @property
    def seconds(self) -> float | None:
        """The least round trip of the last `base_s` seconds (None before any answer)."""
        if not self._mins:
            return None
        self._expire(self.clock())
        return self._mins[0][1]


@dataclass
class InFlightWindow:
    """Requests to keep in flight: the limiter's pace × the path's round trip × `headroom`, within bounds."""

    floor: int = 8
    start: int = 16
    headroom: float = 2.0
    clock: Callable[[], float] = time.monotonic
    round_trip: RoundTrip = field(init=False)

    def __post_init__(self) -> None:
        self.round_trip = RoundTrip(clock=self.clock)

    def observe(self, latency_s: float) -> None:
        """One answered request's round trip."""
        self.round_trip.observe(latency_s)

    @property
    def latency_s(self) -> float | None:
        return self.round_trip.seconds

    def size(self, pace_per_s: float | None, cap: int) -> int:
        """Requests to keep in flight at `pace_per_s` (None: the limiter cannot tell; the cap bounds it)."""
        cap = max(1, min(cap, MAX_IN_FLIGHT))
        latency = self.latency_s
        if latency is None:
            wanted = self.start
        elif pace_per_s is None:
            wanted = cap
        else:
            wanted = math.ceil(pace_per_s * latency * self.headroom)
        return max(min(self.floor, cap), min(cap, wanted))


class InFlight:
    """``async with gate:`` holds one of the window's slots for a request; the bound is recomputed from the
    window and the limiter's pace at every admission and release.

    anyio's `CapacityLimiter` (its bound can change while tasks wait) does the waiting; a slot is held per
    asyncio task, so one task holds at most one at a time.
    """

    def __init__(self, window: InFlightWindow, pace: Callable[[], float | None], cap: int) -> None:
        self.window = window
        self.cap = cap
        self._pace = pace
        self._slots = anyio.CapacityLimiter(self.size)
        self.peak = 0

    @property
    def size(self) -> int:
        return self.window.size(self._pace(), self.cap)

    @property
    def active(self) -> int:
        return self._slots.borrowed_tokens

    async def __aenter__(self) -> None:
        self._slots.total_tokens = self.size
        await self._slots.acquire()
        self.peak = max(self.peak, self._slots.borrowed_tokens)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._slots.total_tokens = self.size
        self._slots.release()
