"""Helpers of the part-2 emulator tests (collections, transfers, events, webhooks, checkouts, utilities)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.sandbox.sandbox_support import Api

ENDPOINTS = "/_sandbox/businesses/{biz}/{env}/webhook-endpoints"


def ref(prefix: str = "r") -> str:
    """A fresh valid reference."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def collection(
    reference: str | None = None,
    amount: str = "100.00",
    payer: str = "233241234567",
    provider: str = "mtn",
    ptype: str = "msisdn",
    **extra: Any,
) -> dict[str, Any]:
    """A valid collection request body."""
    body = {
        "reference": reference or ref("c"),
        "amount": amount,
        "currency": "GHS",
        "provider": provider,
        "payer": {"type": ptype, "value": payer},
    }
    body.update(extra)
    return body


async def add_endpoint(
    client: httpx.AsyncClient,
    url: str = "https://hooks.example.com/payops",
    *,
    biz: str = "demo",
    env: str = "test",
    **extra: Any,
) -> httpx.Response:
    """Register a webhook endpoint through the admin API."""
    return await client.post(ENDPOINTS.format(biz=biz, env=env), json={"url": url, **extra})


async def api_for(client: httpx.AsyncClient, permissions: list[str], business: str = "demo") -> Api:
    """An ``Api`` whose token carries only ``permissions`` (minted by the admin endpoint)."""
    r = await client.post("/_sandbox/tokens", json={"business": business, "permissions": permissions})
    assert r.status_code == 200, r.text
    api = Api(client)
    api.token = r.json()["access_token"]
    return api


async def acme(client: httpx.AsyncClient) -> Api:
    """Logged-in ``Api`` of the second business (handle acme-traders)."""
    api = Api(client, "acme-test-client", "acme-test-secret")
    await api.login()
    return api
