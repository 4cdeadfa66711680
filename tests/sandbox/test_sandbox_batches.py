"""Spec § POST /v1/payout-batches, rules 1–5."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.sandbox.sandbox_support import Api, payout


def batch(ref: str, items: list[dict]) -> dict:
    return {"reference": ref, "items": items}


async def test_rule1_each_item_on_its_own(api, demo) -> None:
    items = [payout("i1"), payout("i2", amount="100000.01"), payout("i3")]
    r = await api.post("/v1/payout-batches", batch("b1", items))
    assert r.status_code == 200
    body = r.json()
    assert body["reference"] == "b1" and body["batchId"]
    assert [(i["reference"], i["status"]) for i in body["items"]] == [("i1", 202), ("i2", 403), ("i3", 202)]
    assert body["items"][0]["payout"]["status"] == "accepted" and "error" not in body["items"][0]
    assert (
        body["items"][1]["error"]["code"] == "transaction_limit_exceeded" and "payout" not in body["items"][1]
    )
    assert set(demo.payouts) == {"i1", "i3"}


async def test_rule2_limits_apply_per_item_as_if_sent_alone(api, client) -> None:
    limits = {"GHS": {"perTransaction": "100.00", "daily": "250.00", "monthly": "1000.00"}}
    await client.put("/_sandbox/businesses/demo/test/limits", json={"limits": limits})
    items = [payout(f"d{i}", amount="100.00") for i in range(3)] + [payout("d3", amount="50.00")]
    body = (await api.post("/v1/payout-batches", batch("b2", items))).json()
    assert [i["status"] for i in body["items"]] == [202, 202, 403, 202]
    assert body["items"][2]["error"]["code"] == "daily_limit_exceeded"
    single = await api.post("/v1/payouts", payout("d4", amount="100.00"))
    assert single.status_code == 403 and single.json()["error"] == body["items"][2]["error"]


async def test_insufficient_balance_per_item(client) -> None:
    acme = Api(client, "acme-test-client", "acme-test-secret")
    await acme.login()
    items = [payout(f"big{i}", amount="99000.00") for i in range(11)]
    body = (await acme.post("/v1/payout-batches", batch("drain", items))).json()
    codes = Counter(i["error"]["code"] if i["status"] != 202 else 202 for i in body["items"])
    assert codes == {202: 10, "insufficient_balance": 1}  # 1,000,000 covers ten of 99,020.00
    assert next(i for i in body["items"] if i["status"] != 202)["status"] == 403


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([], "items"),
        ([payout(f"n{i}") for i in range(101)], "items"),
        ([payout("ok1"), payout("bad", amount=5)], "items[1].amount"),
        ([payout("ok1"), payout("ok2", provider="nobank")], "items[1].provider"),
        ([payout("same"), payout("same")], "items"),
    ],
)
async def test_rule3_malformed_batch_is_refused_whole(api, demo, items, field) -> None:
    r = await api.post("/v1/payout-batches", batch("bad-batch", items))
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_input"
    assert r.json()["error"]["message"].startswith(field)
    assert not demo.payouts and demo.wallet.reserved["GHS"] == 0


async def test_batch_of_100_is_accepted(api, demo) -> None:
    r = await api.post("/v1/payout-batches", batch("full", [payout(f"f{i}") for i in range(100)]))
    assert r.status_code == 200 and len(r.json()["items"]) == 100
    assert len(demo.payouts) == 100


async def test_rule4_retry_does_not_send_again(api, demo) -> None:
    body = batch("b4", [payout("r1"), payout("r2")])
    first = await api.post("/v1/payout-batches", body, key="batch-key")
    again = await api.post("/v1/payout-batches", body, key="batch-key")
    assert again.content == first.content
    new_key = await api.post("/v1/payout-batches", body, key="another-key")
    assert new_key.content == first.content  # same body under a new key replays the first answer
    assert len(demo.payouts) == 2
    changed = await api.post("/v1/payout-batches", batch("b4", [payout("r1")]), key="third-key")
    assert changed.status_code == 409 and changed.json()["error"]["code"] == "duplicate_reference"


async def test_item_reference_used_before(api, demo) -> None:
    single = await api.post("/v1/payouts", payout("pre", amount="5.00"))
    items = [payout("pre", amount="5.00"), payout("pre2"), payout("pre3")]
    await api.post("/v1/payouts", payout("pre2", amount="7.00"))
    body = (await api.post("/v1/payout-batches", batch("b5", items))).json()
    assert body["items"][0] == {"reference": "pre", "status": 202, "payout": single.json()}
    assert body["items"][1]["status"] == 409 and body["items"][1]["error"]["code"] == "duplicate_reference"
    assert body["items"][2]["status"] == 202
    assert len(demo.payouts) == 3


async def test_rule5_events_per_payout_not_per_batch(api, demo) -> None:
    await api.post("/v1/payout-batches", batch("b6", [payout("e1"), payout("e2")]))
    assert [(e.type, e.data["reference"]) for e in demo.events] == [
        ("payout.accepted", "e1"),
        ("payout.accepted", "e2"),
    ]
    assert not any(e.type.startswith("batch") for e in demo.events)
