"""The in-process fallback limiter holds the rate; the transport counts what the limit costs."""

from __future__ import annotations

import asyncio
import time

import httpx
from payops.tasks.runtime.ratelimit import AdaptiveRate, RateLimitedTransport, resolve_limiter


async def test_the_local_limiter_holds_its_rate() -> None:
    limiter = AdaptiveRate(20, start=20)  # its bucket starts full: one second at the starting rate
    t0 = time.monotonic()
    await asyncio.gather(*(limiter.acquire() for _ in range(31)))
    assert time.monotonic() - t0 >= 0.5  # 11 waits of 1/20 s after the first 20
    assert limiter.rate == 20  # no answer seen: no evidence for more


async def test_transport_acquires_once_per_request_and_reports_cost() -> None:
    seen = []
    inner = httpx.MockTransport(lambda req: seen.append(req.url.path) or httpx.Response(200, json={}))
    transport = RateLimitedTransport(inner, AdaptiveRate(1000))
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        for _ in range(5):
            await client.get("/v1/wallet")
    assert len(seen) == 5 and transport.stats.acquires == 5
    assert transport.stats.figures().source == "local"


async def test_without_a_prefect_limit_the_local_bucket_is_used(prefect_harness) -> None:
    limiter = await resolve_limiter(10, name="no-such-limit")
    assert limiter.source == "local"


async def test_an_active_prefect_limit_with_slot_decay_is_used(prefect_harness) -> None:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        await client.upsert_global_concurrency_limit_by_name(
            "payments-api-test", limit=50, slot_decay_per_second=50
        )
    limiter = await resolve_limiter(10, name="payments-api-test")
    assert limiter.source == "prefect"
    assert limiter.pace_per_s == 50  # the whole deployment's rate sizes the requests kept in flight
    t0 = time.perf_counter()
    for _ in range(5):
        await limiter.acquire()
    assert time.perf_counter() - t0 < 5
