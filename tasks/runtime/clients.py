"""The Payments clients tasks use, opened and closed by the flow that runs them.

A flow opens its clients with ``async with open_clients(payops):``; every task of that flow run then shares
one client per credential (and event loop), so they share one connection pool and one access token (renewed
before it expires) instead of building both per task, and the clients close when the flow's block ends.
A task called outside such a block (a test, a script) gets a client of its own, closed when the task's
``async with payments_client(...)`` ends. Each task still gets its own figures: ``payments_client`` opens a
counting scope, so ``client.api_calls`` and ``transport.stats`` inside it are that task's alone.

The request rate is shared by every task of the process (one limiter per event loop): two flows running in
one process (``payops serve``) stay within one rate together. An adaptive rate starts at the pace the last run
learned of the service (`tasks.runtime.service_pace`), and what it learned is kept when the flow ends.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from pathlib import Path

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport
from payops.connectors.payments import PaymentsClient, PaymentsSettings
from payops.store.settings import PayopsSettings
from payops.tasks.runtime.inflight import MAX_IN_FLIGHT
from payops.tasks.runtime.memory import set_for_runs
from payops.tasks.runtime.ratelimit import AdaptiveRate, Limiter, RateLimitedTransport, resolve_limiter
from payops.tasks.runtime.service_pace import pace_key, remember, remembered

_Opened = tuple[PaymentsClient, RateLimitedTransport]
_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Limiter] = weakref.WeakKeyDictionary()
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


class PooledTransport(AiohttpTransport):
    """The bytes of the tasks' requests move through aiohttp's connection pool; httpx stays the client.

    httpx's own pool (httpcore 1.0) rescans every connection at each request's start and end and asks anyio
    whether each idle socket is readable: with many requests in flight that CPU dominates a cold pre-flight
    (docs/performance.md, *Per-request client CPU*; `benchmarks/payouts_e2e.py`). `httpx_aiohttp` (the
    transport anthropic-sdk-python offers for the same reason) maps aiohttp's errors to httpx's, but every
    connection error to ``ConnectTimeout``; a refused or dropped connection is raised here as
    ``ConnectError``, as httpx's own transport does, so it is reported and retried as a connection error, not
    a timeout.
    """

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except httpx.ConnectTimeout as exc:
            cause = exc.__cause__
            if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, TimeoutError):
                raise httpx.ConnectError(str(exc), request=request) from cause
            raise


class ClientPool:
    """The clients of one flow run: one per event loop and credential, all closed by :meth:`aclose`."""

    def __init__(self, home: Path | None = None) -> None:
        self._opened: dict[tuple[asyncio.AbstractEventLoop, str], _Opened] = {}
        self.home = home  # where the service's pace is kept (None: rates start afresh, nothing is kept)

    async def get(self, settings: PaymentsSettings, rate_per_s: float) -> _Opened:
        """The pool's client for these credentials on the running loop (opened on first use)."""
        key = (asyncio.get_running_loop(), _credential_key(settings))
        if key not in self._opened:
            pool = PooledTransport(limits=httpx.Limits(max_connections=MAX_IN_FLIGHT))
            limiter = await shared_limiter(rate_per_s, service_key(settings), self.home)
            transport = RateLimitedTransport(pool, limiter)
            self._opened[key] = (PaymentsClient(settings, transport=transport), transport)
        return self._opened[key]

    async def aclose(self) -> None:
        """Close the clients opened on the running loop, keeping the pace each rate learned; those of other
        (finished) loops are dropped."""
        loop = asyncio.get_running_loop()
        opened, self._opened = self._opened, {}
        for (owner, _), (client, transport) in opened.items():
            if owner is loop:
                await client.aclose()
                if self.home is not None:
                    await asyncio.to_thread(keep_pace, client.settings, transport, self.home)


_current: ContextVar[ClientPool | None] = ContextVar("payops_client_pool", default=None)


@asynccontextmanager
async def open_clients(payops: PayopsSettings | None = None) -> AsyncIterator[ClientPool]:
    """The clients of the tasks run inside this block (a flow's body), closed when it ends. Every flow enters
    it first, wherever it was started (a command, `payops serve`, a worker): the process is set for runs
    there (`tasks.runtime.memory.set_for_runs`: rarer full collections, one heap for every thread). With the
    flow's ``payops`` settings, its rates start at the pace kept in their home, and keep what they learn."""
    set_for_runs()
    pool = ClientPool(payops.home_dir() if payops is not None else None)
    token = _current.set(pool)
    try:
        yield pool
    finally:
        _current.reset(token)
        await pool.aclose()


def service_key(settings: PaymentsSettings) -> str:
    """The service and credential a learned pace belongs to (`tasks.runtime.service_pace.pace_key`)."""
    return pace_key(str(settings.base_url), settings.client_id)


def keep_pace(settings: PaymentsSettings, transport: RateLimitedTransport, home: Path) -> None:
    """Keep what ``transport``'s adaptive rate learned of the service in the payops ``home``, for the next
    run (nothing for Prefect's global limit, whose rate is the operator's)."""
    limiter = transport.limiter
    learned = limiter.learned if isinstance(limiter, AdaptiveRate) else None
    if learned is not None:
        remember(service_key(settings), learned, home=home)


def _credential_key(settings: PaymentsSettings) -> str:
    secret = hashlib.sha256(settings.client_secret.get_secret_value().encode()).hexdigest()
    return "|".join(
        [str(settings.base_url), str(settings.auth_url), settings.client_id, secret, str(settings.resource)]
    )


async def shared_limiter(
    fallback_per_s: float, service: str | None = None, home: Path | None = None
) -> Limiter:
    """One limiter per event loop, so every task of a process shares one request rate; an adaptive one
    starts at the pace last learned of ``service`` (`service_key`), as kept in the payops ``home``."""
    loop = asyncio.get_running_loop()  # weak keys: a closed loop's limiter goes with it
    async with _locks.setdefault(loop, asyncio.Lock()):
        if loop not in _limiters:
            pace = None
            if service is not None and home is not None:
                pace = await asyncio.to_thread(remembered, service, home=home)
            _limiters[loop] = await resolve_limiter(fallback_per_s, pace=pace)
    return _limiters[loop]


@asynccontextmanager
async def payments_client(
    settings: PaymentsSettings, *, rate_per_s: float = 50.0
) -> AsyncIterator[tuple[PaymentsClient, RateLimitedTransport]]:
    """The flow's client for these credentials (a client of its own outside ``open_clients``), with this
    task's own call and limiter figures."""
    async with AsyncExitStack() as stack:
        pool = _current.get() or await stack.enter_async_context(open_clients())
        client, transport = await pool.get(settings, rate_per_s)
        with client.counting(), transport.counting():
            yield client, transport
