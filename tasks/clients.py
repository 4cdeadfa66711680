"""The Payments client tasks use: one per event loop and credential, behind the shared request rate.

Tasks of a flow run share one client, so they share one connection pool and one access token (renewed before
it expires) instead of building both per task. Each task still gets its own figures: `payments_client` opens
a counting scope, so `client.api_calls` and `transport.stats` inside it are that task's alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from connectors.payments import PaymentsClient, PaymentsSettings
from tasks.ratelimit import Limiter, RateLimitedTransport, resolve_limiter

_Shared = dict[str, tuple[PaymentsClient, RateLimitedTransport]]
_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Limiter] = weakref.WeakKeyDictionary()
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Shared] = weakref.WeakKeyDictionary()
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _credential_key(settings: PaymentsSettings) -> str:
    secret = hashlib.sha256(settings.client_secret.get_secret_value().encode()).hexdigest()
    return "|".join(
        [str(settings.base_url), str(settings.auth_url), settings.client_id, secret, str(settings.resource)]
    )


async def shared_limiter(fallback_per_s: float) -> Limiter:
    """One limiter per event loop, so every task of a process shares one request rate."""
    loop = asyncio.get_running_loop()  # weak keys: a closed loop's limiter and clients go with it
    async with _locks.setdefault(loop, asyncio.Lock()):
        if loop not in _limiters:
            _limiters[loop] = await resolve_limiter(fallback_per_s)
    return _limiters[loop]


async def _shared_client(
    settings: PaymentsSettings, rate_per_s: float
) -> tuple[PaymentsClient, RateLimitedTransport]:
    limiter = await shared_limiter(rate_per_s)
    shared = _clients.setdefault(asyncio.get_running_loop(), {})
    key = _credential_key(settings)
    if key not in shared:
        transport = RateLimitedTransport(httpx.AsyncHTTPTransport(), limiter)
        shared[key] = (PaymentsClient(settings, transport=transport), transport)
    return shared[key]


@asynccontextmanager
async def payments_client(
    settings: PaymentsSettings, *, rate_per_s: float = 50.0
) -> AsyncIterator[tuple[PaymentsClient, RateLimitedTransport]]:
    """The loop's shared client for these credentials, with this task's own call and limiter figures."""
    client, transport = await _shared_client(settings, rate_per_s)
    with client.counting(), transport.counting():
        yield client, transport


async def close_clients() -> None:
    """Close this loop's shared clients (flows call it when they finish)."""
    for client, _ in _clients.pop(asyncio.get_running_loop(), {}).values():
        await client.aclose()
