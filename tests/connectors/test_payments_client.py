"""Client behaviour over httpx.MockTransport: retries, Idempotency-Key, errors, call counting, pagination."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import httpx
import pytest
from payops.connectors.payments import (
    APIConnectionError,
    APITimeoutError,
    CheckoutUnavailableError,
    DailyLimitExceededError,
    InvalidInputError,
    PayoutRequest,
    RateLimitedError,
    UpstreamTimeoutError,
)
from payops.connectors.payments import errors as e

from tests.connectors.conftest import body, error_response
from tests.connectors.payments_samples import BATCH_RESULT, CHECKOUT, EVENT, PAYOUT, TRANSACTION, WALLET

PAYOUT_FIELDS = {
    "reference": "po-1",
    "amount": Decimal("12.50"),
    "currency": "GHS",
    "provider": "mtn",
    "destination": {"type": "msisdn", "value": "233240000000"},
}


def scripted(*responses: httpx.Response):
    """An API handler answering with ``responses`` in order (the last one repeats)."""
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        template = queue.pop(0) if len(queue) > 1 else queue[0]
        return httpx.Response(template.status_code, headers=template.headers, content=template.read())

    return handler


# Retry table through the client: (first answers, expected attempts, expected sleeps, error or None)
RETRY_CASES = [
    ([error_response(503, "environment_unknown")], 2, [0.5], None),
    ([error_response(500, "internal"), error_response(502, "internal")], 3, [0.5, 1.0], None),
    ([error_response(504, "upstream_timeout")] * 3, 4, [0.5, 1.0, 2.0], None),
    ([error_response(429, "rate_limited", headers={"Retry-After": "3"})], 2, [3.5], None),
    ([error_response(429, "rate_limited", headers={"Retry-After": "3"})] * 2, 3, [3.5, 4.0], None),
    ([error_response(429, "rate_limited")], 2, [0.5], None),
    ([error_response(409, "request_in_flight")] * 2, 3, [0.2, 0.4], None),
    ([error_response(400, "invalid_input")], 1, [], InvalidInputError),
    ([error_response(403, "daily_limit_exceeded")], 1, [], DailyLimitExceededError),
    ([error_response(403, "forbidden")], 1, [], e.ForbiddenError),
    ([error_response(404, "not_found")], 1, [], e.ResourceNotFoundError),
    ([error_response(409, "duplicate_reference")], 1, [], e.DuplicateReferenceError),
    ([error_response(409, "idempotency_key_reused")], 1, [], e.IdempotencyKeyReusedError),
    ([error_response(422, "amount_out_of_range")], 1, [], e.AmountOutOfRangeError),
    ([error_response(503, "checkout_unavailable")], 1, [], CheckoutUnavailableError),
]


@pytest.mark.parametrize("answers,attempts,sleeps,error", RETRY_CASES)
async def test_retry_table_on_post(make_client, answers, attempts, sleeps, error) -> None:
    h = make_client(scripted(*answers, httpx.Response(202, json=PAYOUT)))
    async with h.client as client:
        if error is None:
            payout = await client.payouts.create(**PAYOUT_FIELDS)
            assert payout.reference == "po-1"
        else:
            with pytest.raises(error):
                await client.payouts.create(**PAYOUT_FIELDS)
    assert len(h.service.api_requests) == attempts
    assert h.sleeps == pytest.approx(sleeps)
    assert client.api_calls == {"POST /v1/payouts": attempts}
    keys = {r.headers["Idempotency-Key"] for r in h.service.api_requests}
    bodies = {r.content for r in h.service.api_requests}
    assert len(keys) == 1 and len(bodies) == 1  # every attempt: the same key and the same body


async def test_retry_budget_is_bounded(make_client) -> None:
    h = make_client(scripted(error_response(500, "internal")))
    async with h.client as client:
        with pytest.raises(e.InternalError) as info:
            await client.wallet.get()
    assert len(h.service.api_requests) == client.settings.max_retries + 1 == 5
    assert h.sleeps == [0.5, 1.0, 2.0, 4.0]
    assert info.value.request_id == "req-5" and info.value.status == 500


async def test_retry_after_longer_than_allowed_wait_gives_up(make_client, settings) -> None:
    h = make_client(
        scripted(error_response(429, "rate_limited", headers={"Retry-After": "3600"})),
        settings_=settings.model_copy(update={"max_retry_wait_s": 60.0}),
    )
    async with h.client as client:
        with pytest.raises(RateLimitedError) as info:
            await client.wallet.get()
    assert info.value.retry_after == 3600.0
    assert len(h.service.api_requests) == 1 and h.sleeps == []


async def test_caller_key_is_sent_on_every_attempt(make_client) -> None:
    h = make_client(
        scripted(
            error_response(502, "internal"),
            error_response(504, "upstream_timeout"),
            httpx.Response(200, json=BATCH_RESULT),
        )
    )
    items = [PayoutRequest(**PAYOUT_FIELDS), PayoutRequest(**{**PAYOUT_FIELDS, "reference": "po-2"})]
    async with h.client as client:
        result = await client.payout_batches.create(
            reference="batch-1", items=items, idempotency_key="run-7-b-0"
        )
    assert [r.headers["Idempotency-Key"] for r in h.service.api_requests] == ["run-7-b-0"] * 3
    sent = body(h.service.api_requests[0])
    assert sent["items"][0]["amount"] == "12.50" and sent["reference"] == "batch-1"
    assert isinstance(sent["items"][0]["amount"], str)
    assert result.items[1].error is not None and result.items[1].error.code == "daily_limit_exceeded"


async def test_every_post_has_a_key_and_gets_have_none(make_client) -> None:
    h = make_client(scripted(httpx.Response(202, json=PAYOUT)))
    async with h.client as client:
        await client.payouts.create(**PAYOUT_FIELDS)
        await client.payouts.create(**PAYOUT_FIELDS)
        await client.payouts.get("po-1")
    post1, post2, get = h.service.api_requests
    assert post1.headers["Idempotency-Key"] != post2.headers["Idempotency-Key"]  # generated once per call
    assert 1 <= len(post1.headers["Idempotency-Key"]) <= 255
    assert "Idempotency-Key" not in get.headers
    assert get.headers["Authorization"] == "Bearer tok-1"
    assert post1.headers["Content-Type"] == "application/json"


async def test_invalid_idempotency_key_is_refused_locally(make_client) -> None:
    h = make_client(scripted(httpx.Response(202, json=PAYOUT)))
    async with h.client as client:
        with pytest.raises(ValueError):
            await client.payouts.create(**PAYOUT_FIELDS, idempotency_key="k" * 256)
    assert h.service.api_requests == []


@pytest.mark.parametrize(
    "exc,expected",
    [(httpx.ReadTimeout("slow"), APITimeoutError), (httpx.ConnectError("refused"), APIConnectionError)],
)
async def test_transport_errors_retry_with_the_same_key(make_client, exc, expected) -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise exc
        return httpx.Response(202, json=PAYOUT)

    h = make_client(handler)
    async with h.client as client:
        await client.payouts.create(**PAYOUT_FIELDS)
    assert len({r.headers["Idempotency-Key"] for r in h.service.api_requests}) == 1
    assert len(h.service.api_requests) == 3 and h.sleeps == [0.5, 1.0]

    h2 = make_client(scripted(httpx.Response(200)))
    h2.service.api = lambda request: (_ for _ in ()).throw(exc)
    async with h2.client as client:
        with pytest.raises(expected):
            await client.wallet.get()
    assert len(h2.service.api_requests) == 5


async def test_create_or_get_reads_back_after_504(make_client) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return error_response(504, "upstream_timeout", "internal server error")
        return httpx.Response(200, json={**PAYOUT, "status": "dispatching"})

    h = make_client(handler)
    async with h.client as client:
        payout = await client.payouts.create_or_get(**PAYOUT_FIELDS, idempotency_key="k-1")
    assert payout.status == "dispatching"
    assert client.api_calls == {"POST /v1/payouts": 5, "GET /v1/payouts/{reference}": 1}
    assert h.service.api_requests[-1].url.path == "/v1/payouts/po-1"


async def test_create_or_get_reraises_when_nothing_ran(make_client) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return error_response(504, "upstream_timeout")
        return error_response(404, "not_found")

    h = make_client(handler)
    async with h.client as client:
        with pytest.raises(UpstreamTimeoutError):
            await client.payouts.create_or_get(**PAYOUT_FIELDS)


async def test_create_or_get_after_duplicate_reference(make_client) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return error_response(409, "duplicate_reference")
        return httpx.Response(200, json=PAYOUT)

    h = make_client(handler)
    async with h.client as client:
        payout = await client.payouts.create_or_get(**PAYOUT_FIELDS)
    assert payout.reference == "po-1"
    assert client.api_calls == {"POST /v1/payouts": 1, "GET /v1/payouts/{reference}": 1}


async def test_create_or_get_does_not_mask_refusals(make_client) -> None:
    h = make_client(scripted(error_response(403, "daily_limit_exceeded")))
    async with h.client as client:
        with pytest.raises(DailyLimitExceededError):
            await client.payouts.create_or_get(**PAYOUT_FIELDS)
    assert client.api_calls == {"POST /v1/payouts": 1}


async def test_transactions_iterate_follows_cursor_and_counts_calls(make_client) -> None:
    pages = {
        None: {"items": [TRANSACTION, {**TRANSACTION, "id": "tx-2"}], "nextCursor": "c2"},
        "c2": {"items": [{**TRANSACTION, "id": "tx-3", "kind": "new_kind"}], "nextCursor": "c3"},
        "c3": {"items": []},
    }

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    h = make_client(handler)
    async with h.client as client:
        ids = [tx.id async for tx in client.transactions.iterate(kind="payout", limit=2)]
    assert ids == ["tx-1", "tx-2", "tx-3"]
    assert client.api_calls == {"GET /v1/transactions": 3}
    first = h.service.api_requests[0].url.params
    assert first["kind"] == "payout" and first["limit"] == "2" and "cursor" not in first


async def test_transaction_pages_request_the_next_page_while_the_caller_holds_one(make_client) -> None:
    pages = {
        None: {"items": [TRANSACTION, {**TRANSACTION, "id": "tx-2"}], "nextCursor": "c2"},
        "c2": {"items": [{**TRANSACTION, "id": "tx-3"}], "nextCursor": "c3"},
        "c3": {"items": []},
    }
    asked: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.params.get("cursor"))
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    h = make_client(handler)
    seen: list[tuple[list[str], list[str | None]]] = []
    async with h.client as client:
        async for page in client.transactions.pages(kind="payout", limit=2):
            seen.append(([tx.id for tx in page], list(asked)))  # what was asked when the page was handed over
    assert seen == [
        (["tx-1", "tx-2"], [None, "c2"]),  # page 2 already asked for
        (["tx-3"], [None, "c2", "c3"]),
        ([], [None, "c2", "c3"]),
    ]
    assert client.api_calls == {"GET /v1/transactions": 3}
    assert h.service.api_requests[0].url.params["kind"] == "payout"


async def test_transaction_pages_left_early_drop_the_request_in_flight(make_client) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        n = int(request.url.params.get("cursor") or 0)
        body = {"items": [{**TRANSACTION, "id": f"tx-{n}"}], "nextCursor": str(n + 1)}
        return httpx.Response(200, json=body)

    h = make_client(handler)
    async with h.client as client:
        pager = client.transactions.pages()
        first = await anext(pager)
        await pager.aclose()
        assert [tx.id for tx in first] == ["tx-0"]
        assert client.api_calls["GET /v1/transactions"] <= 2
        assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_transaction_pages_that_do_not_advance_raise(make_client) -> None:
    h = make_client(scripted(httpx.Response(200, json={"items": [TRANSACTION], "nextCursor": "same"})))
    async with h.client as client:
        with pytest.raises(e.PaymentsError, match="did not advance"):
            _ = [page async for page in client.transactions.pages()]


async def test_checkouts_iterate_stops_on_empty_cursor(make_client) -> None:
    pages = {
        None: {"items": [CHECKOUT], "nextCursor": "n1"},
        "n1": {"items": [{**CHECKOUT, "status": "archived"}], "nextCursor": ""},
    }
    h = make_client(lambda r: httpx.Response(200, json=pages[r.url.params.get("cursor")]))
    async with h.client as client:
        statuses = [c.status async for c in client.checkouts.iterate(status="open")]
    assert statuses == ["open", "archived"]


async def test_events_iterate_follows_next_after(make_client) -> None:
    pages = {
        "ev-0": {"items": [EVENT], "nextAfter": "ev-1"},
        "ev-1": {"items": [{**EVENT, "id": "ev-2", "type": "payout.teleported"}]},
    }
    h = make_client(lambda r: httpx.Response(200, json=pages[r.url.params.get("after")]))
    async with h.client as client:
        events = [ev async for ev in client.events.iterate(after="ev-0")]
    assert [(ev.id, ev.type) for ev in events] == [
        ("ev-1", "payout.status_changed"),
        ("ev-2", "payout.teleported"),
    ]


async def test_pagination_that_does_not_advance_raises(make_client) -> None:
    h = make_client(scripted(httpx.Response(200, json={"items": [TRANSACTION], "nextCursor": "same"})))
    async with h.client as client:
        with pytest.raises(e.PaymentsError, match="did not advance"):
            _ = [tx async for tx in client.transactions.iterate()]


async def test_unexpected_success_body_raises_validation_error(make_client) -> None:
    h = make_client(scripted(httpx.Response(200, json={"not": "a wallet"})))
    async with h.client as client:
        with pytest.raises(e.APIResponseValidationError):
            await client.wallet.get()


async def test_decimal_query_parameters_are_plain_decimal_strings(make_client) -> None:
    quote = {"amount": "10.00", "currency": "GHS", "fee": "0.50"}
    h = make_client(scripted(httpx.Response(200, json=quote)))
    async with h.client as client:
        result = await client.fee_quotes.payout(amount=Decimal("1E+1"), currency="GHS", provider="mtn")
    assert h.service.api_requests[0].url.params["amount"] == "10"
    assert result.fee == Decimal("0.50")


async def test_wallet_and_request_id(make_client) -> None:
    h = make_client(scripted(httpx.Response(200, json=WALLET)))
    async with h.client as client:
        wallet = await client.wallet.get()
    assert wallet[0].balances["GHS"] == Decimal("100.00")


async def test_body_and_model_are_exclusive(make_client) -> None:
    h = make_client(scripted(httpx.Response(202, json=PAYOUT)))
    async with h.client as client:
        with pytest.raises(TypeError):
            await client.payouts.create(PayoutRequest(**PAYOUT_FIELDS), reference="x")
        await client.payouts.create(PayoutRequest(**PAYOUT_FIELDS))
    assert json.loads(h.service.api_requests[0].content)["destination"] == {
        "type": "msisdn",
        "value": "233240000000",
    }


async def test_counting_scopes_keep_concurrent_tasks_apart() -> None:
    """Tasks sharing one client each count only their own requests (child tasks included)."""
    import asyncio

    import httpx
    from payops.connectors.payments import PaymentsClient, PaymentsSettings

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/oauth/token"):
            return httpx.Response(200, json={"access_token": "t", "token_type": "Bearer", "expires_in": 300})
        return httpx.Response(200, json={"items": []})

    settings = PaymentsSettings(
        base_url="http://t",
        auth_url="http://t/auth",
        client_id="c",
        client_secret="s",
        resource="urn:payments-api",
    )
    async with PaymentsClient(settings, transport=httpx.MockTransport(handler)) as client:

        async def task(n: int) -> dict[str, int]:
            with client.counting():
                await asyncio.gather(*(client.wallet.get() for _ in range(n)))
                return dict(client.api_calls)

        a, b = await asyncio.gather(task(2), task(5))
        assert a == {"GET /v1/wallet": 2} and b == {"GET /v1/wallet": 5}
        assert client.api_calls == {"GET /v1/wallet": 7}
