"""Spec § Events: endpoint registration rules, real signed deliveries to a 127.0.0.1 receiver, retries,
redirects, rotation, test events, delivery log and replay, and the background worker on a system clock."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import payops.sandbox.delivery as delivery_mod
import pytest
from payops.sandbox import SandboxConfig, create_app
from payops.sandbox.delivery import stop_worker

from tests.sandbox.sandbox_support import ENDPOINTS, Api, add_endpoint, collection, payout

EP = ENDPOINTS.format(biz="demo", env="test")
GAPS = [0, 60, 600, 3600, 18000, 61200]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A tiny HTTP receiver on 127.0.0.1: /ok → 204, /fail → 500, /redirect → 302 to /ok, /slow sleeps."""

    server: ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def paths(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    received: list[Received] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append(Received(self.path, {k: v for k, v in self.headers.items()}, body))
            if self.path == "/slow":
                time.sleep(1.0)
            status = {"/ok": 204, "/fail": 500, "/redirect": 302, "/gone": 410}.get(self.path, 200)
            self.send_response(status)
            if status == 302:
                self.send_header("Location", "/ok")
            payload = b"receiver says no" if status >= 400 else b""
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Receiver(server, received)
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def config(clock) -> SandboxConfig:
    return SandboxConfig(clock=clock, allow_local_webhooks=True)


def verify(received: Received, secret: str) -> bool:
    """Independent check: base64(HMAC-SHA256(secret as issued, id.timestamp.body)) among the v1 signatures."""
    msg_id, ts = received.headers["Webhook-Id"], received.headers["Webhook-Timestamp"]
    expected = base64.b64encode(
        hmac.new(secret.encode(), f"{msg_id}.{ts}.".encode() + received.body, hashlib.sha256).digest()
    ).decode()
    sigs = [s.split(",", 1)[1] for s in received.headers["Webhook-Signature"].split(" ")]
    assert all(s.startswith("v1,") for s in received.headers["Webhook-Signature"].split(" "))
    return any(hmac.compare_digest(expected, s) for s in sigs)


async def flush(client: httpx.AsyncClient) -> int:
    r = await client.post("/_sandbox/webhooks/deliver-due")
    assert r.status_code == 200, r.text
    return r.json()["attempted"]


async def deliveries(client: httpx.AsyncClient, endpoint_id: str) -> list[dict]:
    return (await client.get(f"{EP}/{endpoint_id}/deliveries")).json()["items"]


async def test_signed_deliveries_verify_independently(api, client, clock, receiver) -> None:
    r = await add_endpoint(client, f"{receiver.base}/ok")
    assert r.status_code == 201, r.text
    secret = r.json()["secret"]
    assert secret and "secret" not in (await client.get(f"{EP}/{r.json()['id']}")).json()
    body = payout()
    await api.post("/v1/payouts", body)
    await api.post("/v1/collections", collection())
    clock.advance(2)
    assert await flush(client) == 6
    got = receiver.paths("/ok")
    assert len(got) == 6
    for item in got:
        assert verify(item, secret)
        envelope = json.loads(item.body)
        assert envelope["id"] == item.headers["Webhook-Id"]
        assert set(envelope) == {"id", "type", "createdAt", "data"}
        assert int(item.headers["Webhook-Timestamp"]) == int(clock.now().timestamp())
        assert item.headers["Content-Type"] == "application/json"
    assert not verify(got[0], secret + "x")
    types = sorted(json.loads(i.body)["type"] for i in got)
    assert types.count("payout.status_changed") == 2 and types.count("collection.accepted") == 1
    log = await deliveries(client, r.json()["id"])
    assert {d["status"] for d in log} == {"succeeded"}
    assert all(d["attemptCount"] == 1 and d["attempts"][0]["statusCode"] == 204 for d in log)
    assert await flush(client) == 0  # nothing delivered twice


async def test_failing_receiver_gets_exactly_six_attempts(api, client, clock, receiver) -> None:
    endpoint = (await add_endpoint(client, f"{receiver.base}/fail")).json()
    await api.post("/v1/collections", collection(payer="233241230006"))  # one event at once, next at +1 s
    await flush(client)
    for gap in GAPS[1:]:
        clock.advance(gap - 1)
        await flush(client)
        first = [r for r in receiver.paths("/fail") if json.loads(r.body)["type"] == "collection.accepted"]
        assert len(first) == GAPS.index(gap)  # not yet: one second early
        clock.advance(1)
        await flush(client)
    clock.advance(3 * 86400)
    await flush(client)
    accepted = [r for r in receiver.paths("/fail") if json.loads(r.body)["type"] == "collection.accepted"]
    assert len(accepted) == 6
    assert len({r.headers["Webhook-Id"] for r in accepted}) == 1
    assert len({r.headers["Webhook-Timestamp"] for r in accepted}) == 6  # fresh on every attempt
    log = [d for d in await deliveries(client, endpoint["id"]) if d["eventType"] == "collection.accepted"][0]
    assert log["status"] == "failed" and log["attemptCount"] == 6 and "nextAttemptAt" not in log
    attempt = log["attempts"][0]
    assert attempt["statusCode"] == 500 and attempt["errorClass"] == "http_5xx"
    assert attempt["responseStart"] == "receiver says no" and attempt["durationMs"] >= 0


async def test_redirect_counts_as_failure_and_is_not_followed(api, client, clock, receiver) -> None:
    endpoint = (await add_endpoint(client, f"{receiver.base}/redirect")).json()
    await api.post("/v1/collections", collection(payer="233241230006"))
    await flush(client)
    assert len(receiver.paths("/redirect")) == 1 and receiver.paths("/ok") == []
    log = (await deliveries(client, endpoint["id"]))[0]
    assert log["status"] == "pending" and log["attempts"][0]["errorClass"] == "redirect"
    assert log["attempts"][0]["statusCode"] == 302 and "nextAttemptAt" in log


async def test_error_classes_refused_4xx_and_timeout(api, client, clock, receiver, monkeypatch) -> None:
    monkeypatch.setattr(delivery_mod, "TIMEOUT_S", 0.3)
    closed = httpx.URL(receiver.base).copy_with(port=1).__str__()  # nobody listens on port 1
    ids = {}
    for name, url in [
        ("refused", f"{closed}/x"),
        ("http_4xx", f"{receiver.base}/gone"),
        ("timeout", f"{receiver.base}/slow"),
    ]:
        ids[name] = (await add_endpoint(client, url)).json()["id"]
    await api.post("/v1/collections", collection(payer="233241230006"))
    await flush(client)
    for name, endpoint_id in ids.items():
        attempt = (await deliveries(client, endpoint_id))[0]["attempts"][0]
        assert attempt["errorClass"] == name, attempt
    assert (await deliveries(client, ids["http_4xx"]))[0]["attempts"][0]["statusCode"] == 410


async def test_subscriptions_enable_switch_and_cancel(api, client, clock, receiver) -> None:
    only = (
        await add_endpoint(client, f"{receiver.base}/ok", eventTypes=["collection.status_changed"])
    ).json()
    await api.post("/v1/payouts", payout())
    await api.post("/v1/collections", collection())
    clock.advance(2)
    await flush(client)
    assert {json.loads(r.body)["type"] for r in receiver.received} == {"collection.status_changed"}
    failing = (await add_endpoint(client, f"{receiver.base}/fail")).json()
    await api.post("/v1/collections", collection(payer="233241230006"))
    await flush(client)
    r = await client.patch(f"{EP}/{failing['id']}", json={"enabled": False})
    assert r.status_code == 200 and r.json()["enabled"] is False
    assert {d["status"] for d in await deliveries(client, failing["id"])} == {"cancelled"}
    count = len(receiver.received)
    clock.advance(86400)
    await flush(client)
    assert len(receiver.received) == count - 0 or all(r.path != "/fail" for r in receiver.received[count:])
    bad = await client.patch(f"{EP}/{only['id']}", json={"eventTypes": ["checkout.paid"]})
    assert bad.status_code == 400


async def test_rotation_signs_with_both_secrets_for_24h(api, client, clock, receiver) -> None:
    created = (await add_endpoint(client, f"{receiver.base}/ok")).json()
    old = created["secret"]
    rotated = (await client.post(f"{EP}/{created['id']}/rotate-secret")).json()
    new = rotated["secret"]
    assert new != old
    await api.post("/v1/collections", collection(payer="233241230006"))
    await flush(client)
    item = receiver.received[-1]
    assert len(item.headers["Webhook-Signature"].split(" ")) == 2
    assert verify(item, new) and verify(item, old)
    clock.advance(24 * 3600 + 1)
    await api.login()
    await api.post("/v1/collections", collection(payer="233241230006"))
    await flush(client)
    item = receiver.received[-1]
    assert len(item.headers["Webhook-Signature"].split(" ")) == 1
    assert verify(item, new) and not verify(item, old)


async def test_test_event_and_replay_keep_event_id(client, receiver) -> None:
    endpoint = (await add_endpoint(client, f"{receiver.base}/ok")).json()
    r = await client.post(f"{EP}/{endpoint['id']}/test")
    assert r.status_code == 202
    await flush(client)
    first = receiver.received[-1]
    assert json.loads(first.body)["type"] == "webhook.test" and verify(first, endpoint["secret"])
    delivery_id = (await deliveries(client, endpoint["id"]))[0]["id"]
    r = await client.post(f"/_sandbox/businesses/demo/test/webhook-deliveries/{delivery_id}/replay")
    assert r.status_code == 202 and r.json()["replayOf"] == delivery_id
    await flush(client)
    assert receiver.received[-1].headers["Webhook-Id"] == first.headers["Webhook-Id"]
    assert receiver.received[-1].body == first.body
    await client.patch(f"{EP}/{endpoint['id']}", json={"enabled": False})
    assert (await client.post(f"{EP}/{endpoint['id']}/test")).status_code == 409


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/x",
        "https://10.1.2.3/x",
        "https://192.168.0.5/x",
        "https://localhost/x",
        "https://[::1]/x",
        "https://169.254.169.254/latest",
        "ftp://example.com/x",
        "not a url",
        "http://127.0.0.1:9/x",
        "https://127.0.0.1/x",
        "https://hooks.internal/x",
    ],
)
async def test_url_must_be_public_https(clock, url) -> None:
    app = create_app(SandboxConfig(clock=clock))  # without allow_local_webhooks
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as c:
        r = await add_endpoint(c, url)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input", (url, r.text)
        assert (await add_endpoint(c, "https://hooks.example.com/x")).status_code == 201


async def test_local_urls_with_the_flag(client) -> None:
    assert (await add_endpoint(client, "http://127.0.0.1:9/x")).status_code == 201
    assert (await add_endpoint(client, "http://localhost:9/x")).status_code == 201
    assert (await add_endpoint(client, "http://10.0.0.1/x")).status_code == 400  # only loopback


async def test_ten_endpoints_per_business_and_each_url_once(client) -> None:
    assert (await add_endpoint(client, "https://hooks.example.com/0")).status_code == 201
    dup = await add_endpoint(client, "https://hooks.example.com/0")
    assert dup.status_code == 409
    assert (await add_endpoint(client, "https://hooks.example.com/0", env="live")).status_code == 201
    for n in range(1, 9):
        assert (await add_endpoint(client, f"https://hooks.example.com/{n}")).status_code == 201
    over = await add_endpoint(client, "https://hooks.example.com/10")
    assert over.status_code == 409 and over.json()["error"]["code"] == "endpoint_limit_reached"
    items = (await client.get(EP)).json()["items"]
    await client.delete(f"{EP}/{items[0]['id']}")
    assert (await add_endpoint(client, "https://hooks.example.com/10")).status_code == 201


async def test_background_worker_delivers_on_system_clock(receiver) -> None:
    app = create_app(SandboxConfig(allow_local_webhooks=True, delivery_delay_s=0.2))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as c:
            assert (await add_endpoint(c, f"{receiver.base}/ok")).status_code == 201
            api = Api(c)
            await api.login()
            body = payout()
            await api.post("/v1/payouts", body)
            deadline = time.monotonic() + 10
            expected = ["accepted", "delivered", "dispatching"]
            while time.monotonic() < deadline:
                statuses = [json.loads(r.body)["data"]["status"] for r in receiver.received]
                if sorted(statuses) == expected:
                    break
                await asyncio.sleep(0.05)
            # Events due in the same delivery round are sent concurrently and may arrive out of order
            # (spec, Events rule 5); each one arrives once.
            assert sorted(statuses) == expected
    finally:
        stop_worker(app.state.sandbox)
