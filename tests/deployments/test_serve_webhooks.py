"""The all-in-one's webhook wiring: the console's receiver registered with the emulator (once, however often
`payops serve` starts), for the forward filter's types, and configured with that endpoint's secret."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from payops.deployments.console import LocalLauncher, create_app
from payops.deployments.serve import WEBHOOK_PATH, wire_webhooks
from payops.deployments.webhook_endpoint import ensure_endpoint, subscribed_types
from payops.sandbox import SandboxConfig, SandboxServer
from payops.tasks.events.payment_events import DEFAULT_FORWARD

from tests.deployments.console_harness import serve_in_thread
from tests.deployments.test_webhook_receiver import Recorder, settings_for

ENDPOINTS = "/_sandbox/businesses/demo/test/webhook-endpoints"


@pytest.fixture(scope="module")
def emulator() -> Any:
    with SandboxServer(SandboxConfig(allow_local_webhooks=True)) as server:
        yield server


def endpoints(emulator: SandboxServer) -> list[dict[str, Any]]:
    return httpx.get(f"{emulator.base_url}{ENDPOINTS}", timeout=5).json()["items"]


def test_subscribed_types_follow_the_forward_filter() -> None:
    default = subscribed_types(DEFAULT_FORWARD)
    assert "payout.status_changed" in default and "settlement.status_changed" in default
    assert "webhook.test" not in default
    assert subscribed_types("settlement.*") == ["settlement.status_changed"]
    assert subscribed_types("payout.*:failed") == ["payout.accepted", "payout.status_changed"]


def test_a_second_start_reuses_the_endpoint_and_rotates_its_secret(emulator: SandboxServer) -> None:
    url = "http://127.0.0.1:9/webhooks/payments-restart"
    first = ensure_endpoint(emulator.base_url, url, ["settlement.status_changed"])
    second = ensure_endpoint(emulator.base_url, url, subscribed_types(DEFAULT_FORWARD))
    mine = [e for e in endpoints(emulator) if e["url"] == url]
    assert len(mine) == 1 and mine[0]["id"] == first.id == second.id
    assert not first.reused and second.reused
    assert mine[0]["eventTypes"] == subscribed_types(DEFAULT_FORWARD)
    assert first.secret != second.secret and second.secret.startswith("whsec_")
    assert second.secret not in repr(second)


def test_the_registered_secret_configures_the_receiver(emulator: SandboxServer, tmp_path: Path) -> None:
    """A signed delivery from the emulator is accepted (2xx), not answered 503 "not configured"."""
    said: list[str] = []
    env: dict[str, str] = {"PAYOPS_WEBHOOK_SECRETS": "whsec_configured_elsewhere"}
    # Wire against a port chosen before the console binds: register first, then start the console.
    app_holder: dict[str, Any] = {}
    recorder = Recorder()
    with serve_in_thread(_Lazy(app_holder)) as console:
        receiver = f"{console}{WEBHOOK_PATH}"
        wire_webhooks(emulator.base_url, receiver, env, said.append)
        secret, configured = env["PAYOPS_WEBHOOK_SECRETS"].split(",")
        assert configured == "whsec_configured_elsewhere" and secret.startswith("whsec_")
        assert not any(secret in line for line in said)
        assert any(receiver in line and "registered" in line for line in said)
        settings = settings_for(tmp_path, secrets=env["PAYOPS_WEBHOOK_SECRETS"])
        app_holder["app"] = create_app(settings, launcher=LocalLauncher(), emitter=recorder)
        endpoint = next(e for e in endpoints(emulator) if e["url"] == receiver)
        sent = httpx.post(f"{emulator.base_url}{ENDPOINTS}/{endpoint['id']}/test", timeout=5)
        assert sent.status_code == 202
        deliveries = f"{emulator.base_url}{ENDPOINTS}/{endpoint['id']}/deliveries"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            items = httpx.get(deliveries, timeout=5).json()["items"]
            if items and items[0]["status"] != "pending":
                break
            time.sleep(0.2)
        assert items[0]["status"] == "succeeded", items
        assert items[0]["attempts"][-1]["statusCode"] == 200
        assert '"accepted"' in items[0]["attempts"][-1]["responseStart"]


class _Lazy:
    """An ASGI app that forwards to ``holder['app']`` once it is set (the port must exist before the app)."""

    def __init__(self, holder: dict[str, Any]) -> None:
        self.holder = holder

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.holder["app"](scope, receive, send)
