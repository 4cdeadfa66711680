"""Asking the service through the lookup cache: cached answers first, the rest asked with bounded
concurrency, answers stored for their TTL, and a tally of cached / fresh / failed.

What is kept how long: a holder name `name_ttl` (default 7 days); a definitive "no such account" (404)
`failure_ttl` (default 5 minutes, at most an hour); a fee quote `quote_ttl` (default 15 minutes). Transient
failures (5xx, timeouts, 429 after the client's retries) are never stored: the next run asks again.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from payops.store.cache import Cached, LookupCache
from payops.tasks.runtime.inflight import MAX_IN_FLIGHT

K = TypeVar("K")
MAX_FAILURE_TTL = timedelta(hours=1)
MAX_ASKERS = MAX_IN_FLIGHT
"""Coroutines asking per call; the gate bounds requests in flight (never more than `MAX_IN_FLIGHT`)."""


@dataclass(frozen=True)
class CachePolicy:
    """How long each kind of answer is kept."""

    name_ttl: timedelta = timedelta(days=7)
    failure_ttl: timedelta = timedelta(minutes=5)
    quote_ttl: timedelta = timedelta(minutes=15)

    def __post_init__(self) -> None:
        if self.failure_ttl > MAX_FAILURE_TTL:
            raise ValueError(f"failure_ttl {self.failure_ttl} is too long: at most {MAX_FAILURE_TTL}")

    def for_name(self, answer: Cached) -> timedelta:
        return self.name_ttl if answer.ok else self.failure_ttl

    def for_quote(self, answer: Cached) -> timedelta:
        return self.quote_ttl if answer.ok else self.failure_ttl


async def through_cache(
    cache: LookupCache | None,
    kind: str,
    inputs: Mapping[str, K],
    fetch: Callable[[K], Awaitable[Cached | Exception]],
    ttl: Callable[[Cached], timedelta],
    gate: AbstractAsyncContextManager[Any],
) -> tuple[dict[str, Cached | Exception], Counter[str]]:
    """Answers for `inputs` (cache key → input): from the cache when unexpired, else fetched (as many at a
    time as `gate` admits). `fetch` returns a `Cached` to store, or an exception not to store."""
    tally: Counter[str] = Counter()
    found: dict[str, Cached | Exception] = {}
    if cache is not None and inputs:
        found.update(await asyncio.to_thread(cache.get_many, kind, list(inputs)))
    tally["cached"] = len(found)

    missing = [k for k in inputs if k not in found]
    queue = iter(missing)

    async def asker() -> None:
        # A few askers share one queue: a coroutine per key would be 100,000 tasks on a big sheet.
        for key in queue:
            async with gate:
                found[key] = answer = await fetch(inputs[key])
            tally["fresh" if isinstance(answer, Cached) and answer.ok else "failed"] += 1

    await asyncio.gather(*(asker() for _ in range(min(len(missing), MAX_ASKERS))))
    if cache is not None:
        fetched = {k: a for k in missing if isinstance(a := found[k], Cached)}
        await asyncio.to_thread(cache.put_many, kind, fetched, ttl)
    return found, tally
