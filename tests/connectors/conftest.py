"""Fixtures for the payments connector: settings, a scripted fake service on httpx.MockTransport,
sample wire bodies, and an injectable sleep/clock."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from payops.connectors.payments import PaymentsClient, PaymentsSettings

CLIENT_SECRET = "cs-very-secret-value-123"
BASE_URL = "http://payments.test"


class FixedRandom(random.Random):
    """``random()`` always returns ``value`` (jitter becomes deterministic)."""

    def __init__(self, value: float = 0.0) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


class ManualClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


Handler = Callable[[httpx.Request], Awaitable[httpx.Response] | httpx.Response]


@dataclass
class FakeService:
    """A MockTransport script: token endpoint plus an API handler; records every request."""

    api: Handler
    token_lifetime: int = 300
    token_delay: float = 0.0
    token_status: int = 200
    api_requests: list[httpx.Request] = field(default_factory=list)
    token_requests: list[httpx.Request] = field(default_factory=list)
    issued: list[str] = field(default_factory=list)
    seen_auth: list[str] = field(default_factory=list)  # Authorization header as each API request arrived

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/v1/oauth/token"):
            self.token_requests.append(request)
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            if self.token_status != 200:
                return httpx.Response(
                    self.token_status,
                    json={"error": {"code": "unauthenticated", "message": "bad client credentials"}},
                )
            token = f"tok-{len(self.token_requests)}"
            self.issued.append(token)
            return httpx.Response(
                200, json={"access_token": token, "token_type": "Bearer", "expires_in": self.token_lifetime}
            )
        self.api_requests.append(request)
        self.seen_auth.append(request.headers.get("Authorization", ""))
        result = self.api(request)
        if asyncio.iscoroutine(result):
            result = await result
        assert isinstance(result, httpx.Response)
        result.headers.setdefault("Request-Id", f"req-{len(self.api_requests)}")
        return result

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def error_response(status: int, code: str, message: str = "x", headers: dict[str, str] | None = None):
    return httpx.Response(status, json={"error": {"code": code, "message": message}}, headers=headers)


@pytest.fixture
def settings() -> PaymentsSettings:
    return PaymentsSettings(
        base_url=BASE_URL,
        client_id="client-1",
        client_secret=CLIENT_SECRET,
        max_retries=4,
        backoff_base_s=0.5,
        backoff_max_s=8.0,
    )


@dataclass
class Harness:
    service: FakeService
    client: PaymentsClient
    sleeps: list[float]
    clock: ManualClock


@pytest.fixture
def make_client(settings: PaymentsSettings):
    """``make_client(api_handler, **service_kwargs) -> Harness`` with recorded sleeps and a manual clock."""

    def factory(api: Handler, *, settings_: PaymentsSettings | None = None, **service_kwargs: Any) -> Harness:
        service = FakeService(api, **service_kwargs)
        sleeps: list[float] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)

        clock = ManualClock()
        client = PaymentsClient(
            settings_ or settings,
            transport=service.transport(),
            sleep=sleep,
            rng=FixedRandom(0.0),
            clock=clock,
        )
        return Harness(service, client, sleeps, clock)

    return factory


def body(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None


@pytest.fixture
async def emu():
    """A fresh emulator with a connected demo-business client (closed after the test)."""
    from tests.connectors.payments_emulator import make_emulator

    em = make_emulator()
    async with em.client:
        yield em
