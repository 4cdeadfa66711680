"""Spec § Endpoints (Idempotency-Key on every POST) and § Errors 409 codes."""

from __future__ import annotations

import asyncio
import json

import pytest
from payops.sandbox import SandboxConfig, create_app

from tests.sandbox.sandbox_support import Api, payout


@pytest.mark.parametrize("path", ["/v1/payouts", "/v1/payout-batches", "/v1/settlements"])
async def test_key_is_required_on_every_post(api, path) -> None:
    r = await api.client.post(path, json={}, headers=api.headers())
    assert r.status_code == 400
    assert r.json()["error"] == {"code": "invalid_input", "message": "Idempotency-Key: field required"}


@pytest.mark.parametrize(("key", "ok"), [("", False), ("k" * 255, True), ("k" * 256, False)])
async def test_key_length_is_1_to_255(api, key, ok) -> None:
    r = await api.client.post("/v1/payouts", json=payout(), headers=api.headers({"Idempotency-Key": key}))
    if ok:
        assert r.status_code == 202
    else:
        assert r.status_code == 400 and "Idempotency-Key" in r.json()["error"]["message"]


async def test_same_key_same_body_replays_byte_identical(api, clock, state) -> None:
    body = payout("idem-1")
    first = await api.post("/v1/payouts", body, key="key-1")
    clock.advance(5)  # the payout is delivered meanwhile; the replay still shows the first answer
    again = await api.post("/v1/payouts", body, key="key-1")
    assert first.status_code == again.status_code == 202
    assert again.content == first.content
    assert again.headers["Request-Id"] != first.headers["Request-Id"]
    reordered = json.dumps(dict(reversed(list(body.items())))).encode()
    third = await api.post("/v1/payouts", key="key-1", content=reordered)
    assert third.content == first.content
    assert len(state.env("demo", "test").payouts) == 1


async def test_same_key_different_body_is_409(api) -> None:
    assert (await api.post("/v1/payouts", payout("idem-2"), key="key-2")).status_code == 202
    r = await api.post("/v1/payouts", payout("idem-2", amount="11.00"), key="key-2")
    assert r.status_code == 409 and r.json()["error"]["code"] == "idempotency_key_reused"
    r = await api.post("/v1/payout-batches", {"reference": "b", "items": [payout()]}, key="key-2")
    assert r.status_code == 409 and r.json()["error"]["code"] == "idempotency_key_reused"


async def test_refusals_are_replayed_too(api, client) -> None:
    body = payout("too-big", amount="100000.01")
    first = await api.post("/v1/payouts", body, key="key-3")
    assert first.status_code == 403 and first.json()["error"]["code"] == "transaction_limit_exceeded"
    assert (await api.post("/v1/payouts", body, key="key-3")).content == first.content


async def test_request_in_flight(clock) -> None:
    import httpx

    app = create_app(SandboxConfig(clock=clock, latency_ms=200))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as client:
        api = Api(client)
        await api.login()
        body = payout("slow")
        first, second = await asyncio.gather(
            api.post("/v1/payouts", body, key="slow-key"),
            api.post("/v1/payouts", body, key="slow-key"),
        )
        statuses = sorted([first.status_code, second.status_code])
        assert statuses == [202, 409]
        loser = first if first.status_code == 409 else second
        assert loser.json()["error"]["code"] == "request_in_flight"
        winner = second if loser is first else first
        assert (await api.post("/v1/payouts", body, key="slow-key")).content == winner.content


async def test_duplicate_reference_and_replay_under_new_key(api, state) -> None:
    body = payout("dup-ref")
    first = await api.post("/v1/payouts", body, key="a")
    r = await api.post("/v1/payouts", payout("dup-ref", amount="12.00"), key="b")
    assert r.status_code == 409 and r.json()["error"]["code"] == "duplicate_reference"
    replay = await api.post("/v1/payouts", body, key="c")
    assert replay.status_code == 202 and replay.content == first.content
    assert len(state.env("demo", "test").payouts) == 1


async def test_keys_are_scoped_per_business_and_environment(client) -> None:
    demo, acme = Api(client), Api(client, "acme-test-client", "acme-test-secret")
    live = Api(client, "demo-live-client", "demo-live-secret")
    for a in (demo, acme, live):
        await a.login()
    r1 = await demo.post("/v1/payouts", payout("scoped", amount="1.00"), key="same-key")
    r2 = await acme.post("/v1/payouts", payout("scoped", amount="2.00"), key="same-key")
    r3 = await live.post("/v1/payouts", payout("scoped", amount="3.00"), key="same-key")
    assert [r.status_code for r in (r1, r2, r3)] == [202, 202, 202]
    assert [r.json()["amount"] for r in (r1, r2, r3)] == ["1.00", "2.00", "3.00"]


async def test_validation_failures_do_not_consume_the_key(api) -> None:
    r = await api.post("/v1/payouts", payout("v", amount="1.001"), key="k-valid")
    assert r.status_code == 400
    assert (await api.post("/v1/payouts", payout("v"), key="k-valid")).status_code == 202
