"""One request rate shared by every flow run and worker.

Where the Prefect server has a global concurrency limit named `payments-api` with a slot decay (its decay is
requests per second), every API request acquires one slot of it, so all workers together stay under the rate.
Where none is configured, an in-process token bucket keeps this process under `fallback_per_s`. The bucket is
hand-rolled on purpose: it is a dozen lines, async, and only a fallback for Prefect's own limiter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

import httpx

LIMIT_NAME = "payments-api"
log = logging.getLogger(__name__)


class Limiter(Protocol):
    source: str

    async def acquire(self) -> None: ...


class TokenBucket:
    """In-process limiter: `rate` requests per second, bursts up to `burst`."""

    source = "local"

    def __init__(self, rate: float, burst: float | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.capacity = burst if burst is not None else max(1.0, rate)
        self._tokens = self.capacity
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.rate)


class PrefectRateLimit:
    """Prefect global concurrency limit used as a rate limit (slots decay at the limit's rate)."""

    source = "prefect"

    def __init__(self, name: str = LIMIT_NAME) -> None:
        self.name = name

    async def acquire(self) -> None:
        from prefect.concurrency.asyncio import rate_limit

        await rate_limit(self.name, occupy=1, strict=True)


async def resolve_limiter(fallback_per_s: float, name: str = LIMIT_NAME) -> Limiter:
    """Prefect's limit when the server has an active one with a slot decay, else a local token bucket."""
    try:
        from prefect.client.orchestration import get_client

        async with get_client() as client:
            limit = await client.read_global_concurrency_limit_by_name(name)
        if limit.active and (limit.slot_decay_per_second or 0) > 0:
            return PrefectRateLimit(name)
        log.info("global concurrency limit %r is inactive or has no slot decay; using a local limiter", name)
    except Exception as exc:  # noqa: BLE001 - a missing limit or no server both mean: limit locally
        log.info(
            "no usable global concurrency limit %r (%s); using a local limiter", name, type(exc).__name__
        )
    return TokenBucket(fallback_per_s)


@dataclass
class LimiterStats:
    """What the limiter cost: acquisitions and the time spent waiting for them."""

    source: str
    acquires: int = 0
    wait_s: float = 0.0
    request_s: float = 0.0

    @classmethod
    def combine(cls, parts: list[LimiterStats]) -> LimiterStats:
        """One figure for several tasks' transports."""
        sources = ",".join(sorted({p.source for p in parts})) or "none"
        return cls(
            sources,
            sum(p.acquires for p in parts),
            sum(p.wait_s for p in parts),
            sum(p.request_s for p in parts),
        )

    def as_dict(self) -> dict[str, object]:
        avg_wait = self.wait_s / self.acquires if self.acquires else 0.0
        avg_req = self.request_s / self.acquires if self.acquires else 0.0
        return {
            "source": self.source,
            "acquires": self.acquires,
            "wait_ms_avg": round(avg_wait * 1000, 2),
            "request_ms_avg": round(avg_req * 1000, 2),
        }


_STATS_SCOPE: ContextVar[LimiterStats | None] = ContextVar("payops_limiter_stats", default=None)


class RateLimitedTransport(httpx.AsyncBaseTransport):
    """Acquires one limiter slot before every request it sends (retries included)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, limiter: Limiter) -> None:
        self.inner = inner
        self.limiter = limiter
        self._stats = LimiterStats(source=limiter.source)

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
        try:
            return await self.inner.handle_async_request(request)
        finally:
            spent = time.perf_counter() - t1
            for stats in {id(s): s for s in (self._stats, _STATS_SCOPE.get()) if s is not None}.values():
                stats.acquires += 1
                stats.wait_s += t1 - t0
                stats.request_s += spent

    async def aclose(self) -> None:
        await self.inner.aclose()
