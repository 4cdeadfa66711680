"""Auth flow: cached token, renewal before expiry, single-flight at expiry, one replay after 401."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

import httpx
import pytest
from payops.connectors.payments import UnauthenticatedError

from tests.connectors.conftest import CLIENT_SECRET, error_response
from tests.connectors.payments_samples import WALLET


def wallet_ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=WALLET)


async def test_token_request_is_form_encoded_and_cached(make_client) -> None:
    h = make_client(wallet_ok)
    async with h.client as client:
        for _ in range(5):
            await client.wallet.get()
    assert len(h.service.token_requests) == 1 and client.token_requests == 1
    token_request = h.service.token_requests[0]
    assert token_request.url == "http://payments.test/auth/v1/oauth/token"
    assert token_request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert "Authorization" not in token_request.headers  # fetched with the bare client
    form = parse_qs(token_request.content.decode())
    assert form == {
        "grant_type": ["client_credentials"],
        "client_id": ["client-1"],
        "client_secret": [CLIENT_SECRET],
        "resource": ["urn:payments-api"],
    }
    assert client.api_calls == {"GET /v1/wallet": 5}  # token requests are not API calls


async def test_token_renewed_shortly_before_expiry(make_client) -> None:
    h = make_client(wallet_ok)
    async with h.client as client:
        await client.wallet.get()
        h.clock.advance(300 - 30 - 1)  # still inside the lifetime minus the renewal margin
        await client.wallet.get()
        assert len(h.service.token_requests) == 1
        h.clock.advance(2)  # within 30 s of expiry: renew before the server would refuse it
        await client.wallet.get()
    assert len(h.service.token_requests) == 2
    assert h.service.seen_auth == [
        "Bearer tok-1",
        "Bearer tok-1",
        "Bearer tok-2",
    ]


async def test_200_concurrent_calls_at_expiry_make_exactly_one_token_request(make_client) -> None:
    async def slow_wallet(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0)
        return httpx.Response(200, json=WALLET)

    h = make_client(slow_wallet, token_delay=0.02)
    async with h.client as client:
        await client.wallet.get()
        h.clock.advance(301)  # the cached token has expired
        results = await asyncio.gather(*(client.wallet.get() for _ in range(200)))
    assert len(results) == 200
    assert len(h.service.token_requests) == 2  # the first token, then exactly one renewal
    assert set(h.service.seen_auth[1:]) == {"Bearer tok-2"}
    assert client.api_calls["GET /v1/wallet"] == 201


async def test_200_concurrent_first_calls_share_one_token(make_client) -> None:
    h = make_client(wallet_ok, token_delay=0.02)
    async with h.client as client:
        await asyncio.gather(*(client.wallet.get() for _ in range(200)))
    assert len(h.service.token_requests) == 1


async def test_401_once_then_success_renews_and_replays_once(make_client) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.headers["Authorization"] == "Bearer tok-1":
            return error_response(401, "unauthenticated", "token expired")
        return httpx.Response(200, json=WALLET)

    h = make_client(handler)
    async with h.client as client:
        wallet = await client.wallet.get()
    assert wallet[0].name == "Demo"
    assert len(h.service.token_requests) == 2
    assert h.service.seen_auth == ["Bearer tok-1", "Bearer tok-2"]
    assert client.api_calls == {"GET /v1/wallet": 2}
    assert h.sleeps == []


async def test_401_on_post_replays_with_same_key_and_body(make_client) -> None:
    from tests.connectors.payments_samples import PAYOUT

    def handler(request: httpx.Request) -> httpx.Response:
        if request.headers["Authorization"] == "Bearer tok-1":
            return error_response(401, "unauthenticated")
        return httpx.Response(202, json=PAYOUT)

    h = make_client(handler)
    async with h.client as client:
        await client.payouts.create(
            reference="po-1",
            amount="1",
            currency="GHS",
            provider="mtn",
            destination={"type": "msisdn", "value": "1"},
        )
    first, second = h.service.api_requests
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]
    assert first.content == second.content


async def test_401_twice_is_not_retried_further(make_client) -> None:
    h = make_client(lambda r: error_response(401, "unauthenticated"))
    async with h.client as client:
        with pytest.raises(UnauthenticatedError) as info:
            await client.wallet.get()
    assert info.value.status == 401
    assert len(h.service.api_requests) == 2 and len(h.service.token_requests) == 2


async def test_token_endpoint_refusal_raises_authentication_error(make_client) -> None:
    h = make_client(wallet_ok, token_status=401)
    async with h.client as client:
        with pytest.raises(UnauthenticatedError):
            await client.wallet.get()
    assert h.service.api_requests == []
    assert len(h.service.token_requests) == 1  # 401 is not retried


async def test_token_endpoint_5xx_is_retried(make_client) -> None:
    h = make_client(wallet_ok)
    original = h.service.__call__
    state = {"n": 0}

    async def flaky(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/oauth/token"):
            state["n"] += 1
            if state["n"] == 1:
                return error_response(503, "environment_unknown")
        return await original(request)

    h.client._auth._token_client._transport = httpx.MockTransport(flaky)
    async with h.client as client:
        await client.wallet.get()
    assert state["n"] == 2 and h.sleeps == [0.5]


async def test_token_endpoint_429_waits_retry_after(make_client) -> None:
    h = make_client(wallet_ok)
    original = h.service.__call__
    state = {"n": 0}

    async def limited(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/oauth/token"):
            state["n"] += 1
            if state["n"] == 1:
                return error_response(429, "rate_limited", headers={"Retry-After": "4"})
        return await original(request)

    h.client._auth._token_client._transport = httpx.MockTransport(limited)
    async with h.client as client:
        await client.wallet.get()
    assert state["n"] == 2 and h.sleeps == [4.5]
