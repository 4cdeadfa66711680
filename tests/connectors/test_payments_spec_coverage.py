"""Every operation of the contract (openapi.yaml) has a client method, and that method calls that endpoint."""

from __future__ import annotations

import inspect
import re
from decimal import Decimal
from typing import Any

import httpx
import pytest
from payops.connectors.payments import ENDPOINTS, PaymentsClient

from tests.connectors import payments_samples as s
from tests.connectors.contract_tables import contract_endpoints

SPEC_ENDPOINTS = contract_endpoints()

PAYOUT_ITEM = {
    "reference": "po-1",
    "amount": "1.00",
    "currency": "GHS",
    "provider": "mtn",
    "destination": {"type": "msisdn", "value": "233240000000"},
}

# endpoint → (call arguments, response status, response body)
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any], int, Any]] = {
    "POST /v1/collections": (
        (),
        {
            "reference": "co-1",
            "amount": "5",
            "currency": "GHS",
            "provider": "mtn",
            "payer": {"type": "msisdn", "value": "233240000000"},
        },
        202,
        s.COLLECTION,
    ),
    "GET /v1/collections/{reference}": (("co-1",), {}, 200, s.COLLECTION),
    "GET /v1/fee-quotes/collections": (
        (),
        {"amount": Decimal("10"), "currency": "GHS", "provider": "mtn"},
        200,
        s.FEE_QUOTE,
    ),
    "GET /v1/checkouts": ((), {"status": "open", "limit": 5}, 200, {"items": [s.CHECKOUT], "nextCursor": ""}),
    "POST /v1/checkouts": ((), {"reference": "ck-1", "currency": "GHS", "amount": "20"}, 201, s.CHECKOUT),
    "GET /v1/checkouts/{checkoutId}": ((s.CHECKOUT["id"],), {}, 200, s.CHECKOUT),
    "POST /v1/checkouts/{checkoutId}/cancel": (
        (s.CHECKOUT["id"],),
        {},
        200,
        {**s.CHECKOUT, "status": "cancelled"},
    ),
    "POST /v1/payouts": ((), PAYOUT_ITEM, 202, s.PAYOUT),
    "GET /v1/payouts/{reference}": (("po-1",), {}, 200, s.PAYOUT),
    "GET /v1/fee-quotes/payouts": (
        (),
        {"amount": "10", "currency": "GHS", "provider": "mtn"},
        200,
        s.FEE_QUOTE,
    ),
    "POST /v1/payout-batches": ((), {"reference": "batch-1", "items": [PAYOUT_ITEM]}, 200, s.BATCH_RESULT),
    "GET /v1/utility-products": ((), {}, 200, {"items": [s.UTILITY_PRODUCT]}),
    "GET /v1/fee-quotes/utilities": (
        (),
        {"product_id": "mtn-airtime", "amount": "5"},
        200,
        s.UTILITY_FEE_QUOTE,
    ),
    "POST /v1/utility-purchases": (
        (),
        {
            "reference": "up-1",
            "product_id": "mtn-airtime",
            "amount": "5",
            "currency": "GHS",
            "beneficiary": {"msisdn": "233240000000"},
            "funding": {"type": "wallet"},
        },
        202,
        s.UTILITY_PURCHASE,
    ),
    "GET /v1/utility-purchases/{reference}": (("up-1",), {}, 200, s.UTILITY_PURCHASE),
    "GET /v1/limits": ((), {}, 200, s.LIMITS),
    "GET /v1/wallet": ((), {}, 200, s.WALLET),
    "GET /v1/transactions": ((), {"kind": "payout"}, 200, {"items": [s.TRANSACTION]}),
    "GET /v1/settlements": ((), {"limit": 5}, 200, {"items": [s.SETTLEMENT_RUN]}),
    "POST /v1/settlements": ((), {"reference": "st-1"}, 202, s.SETTLEMENT_RUN),
    "GET /v1/settlements/latest": ((), {}, 200, s.SETTLEMENT_RUN),
    "GET /v1/settlements/{id}": ((s.SETTLEMENT_RUN["id"],), {}, 200, s.SETTLEMENT_RUN),
    "POST /v1/settlements/{id}/resettlements": (
        (s.SETTLEMENT_RUN["id"],),
        {"reference": "rs-1"},
        202,
        s.SETTLEMENT_RUN,
    ),
    "GET /v1/settlement-policy": ((), {}, 200, s.POLICY),
    "PUT /v1/settlement-policy": (
        (),
        {
            "schedule": "daily",
            "destinations": [{"type": "bank", "provider": "gcb", "account_number": "1234"}],
        },
        200,
        s.POLICY,
    ),
    "DELETE /v1/settlement-policy": ((), {}, 204, None),
    "POST /v1/transfers": (
        (),
        {"reference": "tr-1", "handle": "acme", "amount": "10", "currency": "GHS"},
        200,
        s.TRANSFER,
    ),
    "GET /v1/transfers/{reference}": (("tr-1",), {}, 200, s.TRANSFER),
    "GET /v1/recipients/{handle}": (("acme-traders",), {}, 200, {"handle": "acme-traders", "name": "Acme"}),
    "GET /v1/payment-methods": (
        (),
        {},
        200,
        {
            "items": [
                {
                    "provider": "mtn",
                    "name": "MTN",
                    "type": "mobile_money",
                    "currencies": ["GHS"],
                    "collections": True,
                    "payouts": True,
                }
            ]
        },
    ),
    "GET /v1/party-lookups": (
        (),
        {"provider": "mtn", "msisdn": "233240000000"},
        200,
        {"provider": "mtn", "msisdn": "233240000000", "name": "Ama Mensah"},
    ),
    "GET /v1/events": ((), {"after": "ev-0"}, 200, {"items": [s.EVENT]}),
}


def test_contract_is_found_and_parsed() -> None:
    assert len(SPEC_ENDPOINTS) >= 30
    assert "GET /v1/settlements/latest" in SPEC_ENDPOINTS  # a row "listed without detail"


@pytest.mark.parametrize("endpoint", sorted(SPEC_ENDPOINTS))
def test_every_spec_endpoint_has_a_client_method(make_client, endpoint: str) -> None:
    assert endpoint in ENDPOINTS, f"no client method for {endpoint}"
    group, name = ENDPOINTS[endpoint].split(".")
    client: PaymentsClient = make_client(lambda r: httpx.Response(500)).client
    assert inspect.iscoroutinefunction(getattr(getattr(client, group), name))
    assert endpoint in CALLS, f"no call test for {endpoint}"


def test_mapping_has_no_endpoint_outside_the_spec() -> None:
    assert set(ENDPOINTS) == SPEC_ENDPOINTS


def _template_regex(template: str) -> re.Pattern[str]:
    return re.compile(
        "^" + re.sub(r"\{[^}]+\}", "[^/]+", re.escape(template).replace(r"\{", "{").replace(r"\}", "}")) + "$"
    )


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
async def test_method_calls_its_endpoint(make_client, endpoint: str) -> None:
    args, kwargs, status, payload = CALLS[endpoint]
    expected_method, template = endpoint.split(" ", 1)
    h = make_client(
        lambda r: httpx.Response(status, json=payload) if payload is not None else httpx.Response(status)
    )
    group, name = ENDPOINTS[endpoint].split(".")
    async with h.client as client:
        method = getattr(getattr(client, group), name)
        result = await method(*args, **kwargs)
    (request,) = h.service.api_requests
    assert request.method == expected_method
    assert _template_regex(template).match(request.url.path), request.url.path
    assert client.api_calls == {endpoint: 1}
    if expected_method == "POST":
        assert request.headers["Idempotency-Key"]
    if payload is None:
        assert result is None
    else:
        assert result is not None
