"""Helpers of the emulator tests: a token-carrying client and request builders."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx

START = datetime(2025, 3, 12, 10, 0, 0, tzinfo=UTC)  # a Wednesday, 10:00 Africa/Accra (UTC+0)


class Api:
    """A thin test client: obtains a token for a credential and sends Idempotency-Keys on POSTs."""

    def __init__(
        self, client: httpx.AsyncClient, client_id: str = "demo-test-client", secret: str = "demo-test-secret"
    ) -> None:
        self.client = client
        self.client_id = client_id
        self.secret = secret
        self.token: str | None = None

    async def login(self) -> str:
        r = await self.client.post(
            "/auth/v1/oauth/token",
            data={
                "grant_type": "client_credentials",
                "client_id": self.client_id,
                "client_secret": self.secret,
                "resource": "urn:payments-api",
            },
        )
        assert r.status_code == 200, r.text
        self.token = r.json()["access_token"]
        return self.token

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        h.update(extra or {})
        return h

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.get(path, params=params or None, headers=self.headers())

    async def post(
        self,
        path: str,
        body: Any = None,
        key: str | None = None,
        *,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        h = self.headers({"Idempotency-Key": key or str(uuid.uuid4()), **(headers or {})})
        if content is not None:
            return await self.client.post(
                path, content=content, headers={**h, "Content-Type": "application/json"}
            )
        return await self.client.post(path, json=body, headers=h)

    async def put(self, path: str, body: Any) -> httpx.Response:
        return await self.client.put(path, json=body, headers=self.headers())

    async def delete(self, path: str) -> httpx.Response:
        return await self.client.delete(path, headers=self.headers())


def payout(
    reference: str | None = None,
    amount: str = "10.00",
    value: str = "233241234567",
    provider: str = "mtn",
    dtype: str = "msisdn",
    **extra: Any,
) -> dict[str, Any]:
    """A valid payout request body."""
    body = {
        "reference": reference or f"p-{uuid.uuid4().hex[:12]}",
        "amount": amount,
        "currency": "GHS",
        "provider": provider,
        "destination": {"type": dtype, "value": value},
    }
    body.update(extra)
    return body


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
