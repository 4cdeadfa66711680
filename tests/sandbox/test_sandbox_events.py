"""Spec § Catch-up: GET /v1/events — order, after/nextAfter, limit, permissions, existence, gating,
retention, lag."""

from __future__ import annotations

import pytest

from tests.sandbox.sandbox_support import ENDPOINTS, add_endpoint, api_for, collection, payout, ref


async def all_events(api, **params) -> list[dict]:
    items, after = [], None
    while True:
        q = {**params, **({"after": after} if after else {})}
        r = await api.get("/v1/events", **q)
        assert r.status_code == 200, r.text
        page = r.json()
        items += page["items"]
        if "nextAfter" not in page:
            return items
        after = page["nextAfter"]


async def test_no_events_before_an_endpoint_exists(api, client, clock) -> None:
    await api.post("/v1/payouts", payout())
    clock.advance(5)
    assert (await api.get("/v1/events")).json() == {"items": []}
    assert (await add_endpoint(client)).status_code == 201
    clock.advance(5)
    assert (await api.get("/v1/events")).json() == {"items": []}  # earlier events do not appear later
    await api.post("/v1/payouts", payout())
    clock.advance(5)
    assert [e["type"] for e in (await api.get("/v1/events")).json()["items"]] == [
        "payout.accepted",
        "payout.status_changed",
        "payout.status_changed",
    ]


async def test_lag_order_and_paging(api, client, clock) -> None:
    await add_endpoint(client)
    refs = [ref("p") for _ in range(3)]
    for r in refs:
        await api.post("/v1/payouts", payout(reference=r))
    assert (await api.get("/v1/events")).json()["items"] == []  # within the 2 s lag
    clock.advance(2.0)
    page = (await api.get("/v1/events", limit=2)).json()
    assert [e["data"]["reference"] for e in page["items"]] == refs[:2]
    assert page["nextAfter"] == page["items"][-1]["id"]
    page2 = (await api.get("/v1/events", after=page["nextAfter"], limit=2)).json()
    assert [e["type"] for e in page2["items"]][0] == "payout.accepted"
    assert len(await all_events(api)) == 3  # the status changes at +1 s and +2 s are still within the lag
    clock.advance(5.0)
    events = await all_events(api, limit=1)
    assert len({e["id"] for e in events}) == len(events) >= 6
    seqs = [e["createdAt"] for e in events]
    assert seqs == sorted(seqs)
    last = events[-1]["id"]
    end = (await api.get("/v1/events", after=last)).json()
    assert end == {"items": []}


@pytest.mark.parametrize("limit", [0, 101, "x"])
async def test_limit_bounds(api, limit) -> None:
    r = await api.get("/v1/events", limit=limit)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input"


async def test_visibility_by_permission(api, client, clock) -> None:
    await add_endpoint(client)
    await api.post("/v1/payouts", payout())
    await api.post("/v1/collections", collection())
    await api.post(
        "/v1/transfers",
        {"reference": ref("t"), "handle": "acme-traders", "amount": "5.00", "currency": "GHS"},
    )
    clock.advance(5)
    families = lambda items: {e["type"].split(".")[0] for e in items}  # noqa: E731
    assert families(await all_events(api)) == {"payout", "collection", "transfer"}
    only_col = await api_for(client, ["collections.read"])
    assert families(await all_events(only_col)) == {"collection"}
    only_tr = await api_for(client, ["wallettransfer.read", "transactions.read"])
    assert families(await all_events(only_tr)) == {"transfer"}
    none = await api_for(client, ["transactions.read"])
    r = await none.get("/v1/events")
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


async def test_recipient_sees_transfer_received(api, client, clock) -> None:
    await add_endpoint(client, biz="acme")
    body = {"reference": ref("t"), "handle": "acme-traders", "amount": "5.00", "currency": "GHS"}
    await api.post("/v1/transfers", body)
    clock.advance(5)
    acme_api = await api_for(client, ["wallettransfer.read"], business="acme")
    items = await all_events(acme_api)
    assert [(e["type"], e["data"]["reference"]) for e in items] == [("transfer.received", body["reference"])]
    assert items[0]["data"]["senderHandle"] == "demo-business"


async def test_settlement_events_have_no_id_and_are_gated(api, client, clock, demo) -> None:
    await api.post("/v1/settlements", {"reference": ref("s1")})  # before any endpoint
    clock.advance(5)
    await add_endpoint(client, url="https://legacy.example.com/hook", legacy=True)
    await api.post("/v1/settlements", {"reference": ref("s2")})  # only a legacy endpoint exists
    await api.post("/v1/payouts", payout())
    clock.advance(5)
    types = [e["type"] for e in await all_events(api)]
    assert "settlement.status_changed" not in types and "payout.accepted" in types
    endpoint_id = (await client.get(ENDPOINTS.format(biz="demo", env="test"))).json()["items"][0]["id"]
    r = await client.patch(
        ENDPOINTS.format(biz="demo", env="test") + f"/{endpoint_id}", json={"enabled": True}
    )
    assert r.status_code == 200 and r.json()["legacy"] is False
    s3 = ref("s3")
    await api.post("/v1/settlements", {"reference": s3})
    clock.advance(5)
    settlements = [e for e in await all_events(api) if e["type"] == "settlement.status_changed"]
    assert [e["data"]["reference"] for e in settlements] == [s3, s3]
    assert all("id" not in e["data"] for e in settlements)
    assert [e["data"]["status"] for e in settlements] == ["running", "completed"]


async def test_retention_and_unknown_after(api, client, clock) -> None:
    await add_endpoint(client)
    await api.post("/v1/payouts", payout())
    clock.advance(5)
    first = (await api.get("/v1/events")).json()["items"][0]["id"]
    assert (await api.get("/v1/events", after=first)).status_code == 200
    r = await api.get("/v1/events", after="evt_unknown")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input"
    clock.advance(91 * 86400)
    await api.login()
    r = await api.get("/v1/events", after=first)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("after")
    assert (await api.get("/v1/events")).json()["items"] == []  # expired events are gone


async def test_envelope_shape(api, client, clock) -> None:
    await add_endpoint(client)
    body = payout()
    await api.post("/v1/payouts", body)
    clock.advance(5)
    item = (await api.get("/v1/events")).json()["items"][0]
    assert set(item) == {"id", "type", "createdAt", "data"}
    assert item["data"]["reference"] == body["reference"] and item["data"]["status"] == "accepted"
