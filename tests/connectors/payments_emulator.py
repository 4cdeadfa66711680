"""The emulator (``sandbox``) behind a ``PaymentsClient`` over ``httpx.ASGITransport``, for contract tests.

Token and API requests both go through the same transport. Each emulator runs on a ``ManualClock``;
the client's injected ``sleep`` advances that clock, so retry waits cost no real time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from payops.connectors.payments import PaymentsClient, PaymentsSettings
from payops.sandbox import ManualClock, SandboxConfig, create_app

DEMO_ID, DEMO_SECRET = "demo-test-client", "demo-test-secret"
MSISDN = "233240000000"


@dataclass
class Emulator:
    app: Any
    clock: ManualClock
    client: PaymentsClient
    sleeps: list[float]
    connect: Callable[..., PaymentsClient]

    async def stats(self) -> dict[str, Any]:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://sandbox"
        ) as raw:
            return (await raw.get("/_sandbox/stats")).json()


def make_emulator(config: SandboxConfig | None = None, **settings_over: Any) -> Emulator:
    clock = ManualClock()
    cfg = (config or SandboxConfig()).model_copy(update={"clock": clock})
    app = create_app(cfg)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)

    def connect(**over: Any) -> PaymentsClient:
        values = {
            "base_url": "http://sandbox.test",
            "client_id": DEMO_ID,
            "client_secret": DEMO_SECRET,
            "backoff_base_s": 0.5,
            **settings_over,
            **over,
        }
        return PaymentsClient(PaymentsSettings(**values), transport=httpx.ASGITransport(app=app), sleep=sleep)

    return Emulator(app, clock, connect(), sleeps, connect)
