"""Opening a Payments client inside a task: settings in, a rate-limited client out."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from connectors.payments import PaymentsClient, PaymentsSettings
from tasks.ratelimit import Limiter, RateLimitedTransport, resolve_limiter

_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Limiter] = weakref.WeakKeyDictionary()


async def shared_limiter(fallback_per_s: float) -> Limiter:
    """One limiter per event loop, so every task of a process shares one request rate."""
    key = asyncio.get_running_loop()  # weak: a closed loop's limiter (and its lock) goes with it
    if key not in _limiters:
        _limiters[key] = await resolve_limiter(fallback_per_s)
    return _limiters[key]


@asynccontextmanager
async def payments_client(
    settings: PaymentsSettings, *, rate_per_s: float = 50.0
) -> AsyncIterator[tuple[PaymentsClient, RateLimitedTransport]]:
    """A client whose every request first takes a slot of the shared rate limit."""
    limiter = await shared_limiter(rate_per_s)
    transport = RateLimitedTransport(httpx.AsyncHTTPTransport(), limiter)
    async with PaymentsClient(settings, transport=transport) as client:
        yield client, transport
