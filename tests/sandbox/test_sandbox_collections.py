"""Spec § POST/GET /v1/collections: validation, fees, test values, lifecycle, wallet, settlementStatus,
reconciliation, transactions, events, limits, idempotency."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.sandbox.sandbox_support import api_for, collection, ref


async def test_collection_is_accepted_with_fee_and_non_initiator_bearer(api) -> None:
    r = await api.post("/v1/collections", collection(amount="100.00", note="order 17"))
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "accepted"
    assert body["fee"] == "1.50" and body["feeBearer"] == "non_initiator"
    assert body["payerAmount"] == "100.00" and body["recipientAmount"] == "98.50"
    assert body["settlementStatus"] == "not_eligible"
    assert body["reconciliation"] == {"status": "unchecked"}
    assert body["channel"] == "api" and body["note"] == "order 17"
    assert "completedAt" not in body and "failureReason" not in body


async def test_minimum_fee_and_unpriceable_amount(api) -> None:
    r = await api.post("/v1/collections", collection(amount="5.00"))
    assert r.json()["fee"] == "0.10" and r.json()["recipientAmount"] == "4.90"
    r = await api.post("/v1/collections", collection(amount="0.10"))
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input"
    assert r.json()["error"]["message"].startswith("amount")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"amount": 10}, "amount"),
        ({"amount": "1.001"}, "amount"),
        ({"currency": "USD"}, "currency"),
        ({"provider": "paypal"}, "provider"),
        ({"payer": {"type": "account", "value": "12345678"}}, "payer.type"),
        ({"payer": {"type": "msisdn", "value": "12ab"}}, "payer.value"),
        ({"note": "x" * 51}, "note"),
        ({"reference": "bad ref"}, "reference"),
    ],
)
async def test_invalid_collection_is_400_naming_the_field(api, change, field) -> None:
    r = await api.post("/v1/collections", {**collection(), **change})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_input"
    assert r.json()["error"]["message"].startswith(field)


async def test_permissions(client) -> None:
    reader = await api_for(client, ["collections.read"])
    r = await reader.post("/v1/collections", collection())
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    writer = await api_for(client, ["collections.write"])
    r = await writer.post("/v1/collections", collection(reference="perm-1"))
    assert r.status_code == 202
    r = await writer.get("/v1/collections/perm-1")
    assert r.status_code == 403


async def test_settled_collection_credits_wallet_and_becomes_eligible(api, clock, demo) -> None:
    before = demo.wallet.available["GHS"]
    body = collection(amount="200.00")
    await api.post("/v1/collections", body)
    clock.advance(1.0)
    assert (await api.get(f"/v1/collections/{body['reference']}")).json()["status"] == "dispatched"
    assert demo.wallet.available["GHS"] == before
    clock.advance(1.0)
    got = (await api.get(f"/v1/collections/{body['reference']}")).json()
    assert got["status"] == "settled" and got["settlementStatus"] == "eligible"
    assert got["reconciliation"]["status"] == "matched" and "checkedAt" in got["reconciliation"]
    assert "completedAt" in got
    assert demo.wallet.available["GHS"] == before + Decimal("197.00")
    assert demo.wallet.balanced()


@pytest.mark.parametrize(
    ("suffix", "path", "reason"),
    [
        ("0001", ["dispatched", "failed"], "payer_declined"),
        ("0002", ["dispatched", "failed"], "insufficient_funds"),
        ("0003", ["in_review", "settled"], None),
        ("0004", ["held", "held"], None),
        ("0006", ["dispatched", "dispatched"], None),
        ("0007", ["in_review", "in_review"], None),
        ("0008", ["dispatched", "expired"], None),
    ],
)
async def test_payer_test_values(api, clock, demo, suffix, path, reason) -> None:
    before = demo.wallet.available["GHS"]
    body = collection(payer=f"23324123{suffix}")
    await api.post("/v1/collections", body)
    seen = []
    for _ in path:
        clock.advance(1.0)
        seen.append((await api.get(f"/v1/collections/{body['reference']}")).json())
    assert [s["status"] for s in seen] == path
    assert seen[-1].get("failureReason") == reason
    if path[-1] != "settled":
        assert demo.wallet.available["GHS"] == before
        assert seen[-1]["settlementStatus"] == "not_eligible"


async def test_reconciliation_mismatch_test_value(api, clock) -> None:
    body = collection(payer="233241230009")
    await api.post("/v1/collections", body)
    clock.advance(2.0)
    got = (await api.get(f"/v1/collections/{body['reference']}")).json()
    assert got["status"] == "settled" and got["reconciliation"]["status"] == "mismatched"


async def test_failed_collection_gives_inbound_limit_back(api, clock) -> None:
    body = collection(amount="300.00", payer="233241230001")
    await api.post("/v1/collections", body)
    used = (await api.get("/v1/limits")).json()["items"][0]["daily"]["in"]["used"]
    assert used == "300.00"
    clock.advance(2.0)
    used = (await api.get("/v1/limits")).json()["items"][0]["daily"]["in"]["used"]
    assert used == "0.00"


async def test_inbound_per_transaction_limit(api) -> None:
    r = await api.post("/v1/collections", collection(amount="100000.01"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "transaction_limit_exceeded"


async def test_idempotency_and_duplicate_reference(api) -> None:
    body = collection()
    first = await api.post("/v1/collections", body, key="k-col-1")
    again = await api.post("/v1/collections", body, key="k-col-1")
    assert again.status_code == 202 and again.content == first.content
    other = await api.post("/v1/collections", {**body, "amount": "5.00"}, key="k-col-1")
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_key_reused"
    new_key_same_body = await api.post("/v1/collections", body)
    assert new_key_same_body.status_code == 202 and new_key_same_body.json() == first.json()
    clash = await api.post("/v1/collections", {**body, "amount": "5.00"})
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "duplicate_reference"
    missing = await api.client.post("/v1/collections", json=collection(), headers=api.headers())
    assert missing.status_code == 400 and "Idempotency-Key" in missing.json()["error"]["message"]


async def test_unknown_collection_is_404(api) -> None:
    r = await api.get("/v1/collections/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


async def test_collections_in_transaction_list(api, clock) -> None:
    body = collection(amount="50.00")
    await api.post("/v1/collections", body)
    clock.advance(2.0)
    items = (await api.get("/v1/transactions", kind="collection")).json()["items"]
    mine = [t for t in items if t["reference"] == body["reference"]]
    assert len(mine) == 1
    assert mine[0]["kind"] == "collection" and mine[0]["direction"] == "in" and mine[0]["status"] == "settled"
    eligible = (await api.get("/v1/transactions", settlementStatus="eligible")).json()["items"]
    assert body["reference"] in {t["reference"] for t in eligible}


async def test_settlement_run_claims_then_settles_collections(api, clock, demo) -> None:
    body = collection(amount="80.00")
    await api.post("/v1/collections", body)
    clock.advance(2.0)
    r = await api.post("/v1/settlements", {"reference": ref("stl")})
    assert r.status_code == 202, r.text
    got = (await api.get(f"/v1/collections/{body['reference']}")).json()
    assert got["settlementStatus"] == "claimed"
    clock.advance(2.0)
    got = (await api.get(f"/v1/collections/{body['reference']}")).json()
    assert got["settlementStatus"] == "settled"
    assert demo.wallet.balanced()


async def test_failed_all_run_makes_claims_eligible_again(api, clock) -> None:
    body = collection(amount="80.00")
    await api.post("/v1/collections", body)
    clock.advance(2.0)
    policy = {
        "schedule": "manual",
        "currency": "GHS",
        "minimumBalance": "0.00",
        "destinations": [
            {"type": "bank", "provider": "calbank", "accountNumber": "1400000009991", "share": "100"}
        ],
    }
    assert (await api.put("/v1/settlement-policy", policy)).status_code == 200
    await api.post("/v1/settlements", {"reference": ref("stl")})
    assert (await api.get(f"/v1/collections/{body['reference']}")).json()["settlementStatus"] == "claimed"
    clock.advance(2.0)
    assert (await api.get(f"/v1/collections/{body['reference']}")).json()["settlementStatus"] == "eligible"


async def test_events_of_a_collection(api, clock, demo) -> None:
    body = collection()
    await api.post("/v1/collections", body)
    clock.advance(2.0)
    await api.get(f"/v1/collections/{body['reference']}")
    mine = [e for e in demo.events if e.data.get("reference") == body["reference"]]
    assert [e.type for e in mine] == [
        "collection.accepted",
        "collection.status_changed",
        "collection.status_changed",
    ]
    assert [e.data["status"] for e in mine] == ["accepted", "dispatched", "settled"]


@pytest.mark.parametrize(
    ("msisdn", "status", "code"),
    [
        ("233240000404", 404, "not_found"),
        ("233240000502", 502, "provider_error"),
        ("233240000504", 504, "provider_timeout"),
    ],
)
async def test_party_lookup_test_values(api, msisdn, status, code) -> None:
    r = await api.get("/v1/party-lookups", provider="mtn", msisdn=msisdn)
    assert r.status_code == status and r.json()["error"]["code"] == code


async def test_party_lookup_name_is_deterministic(api, client) -> None:
    a = await api.get("/v1/party-lookups", provider="mtn", msisdn="233241112222")
    b = await api.get("/v1/party-lookups", provider="telecel", msisdn="233241112222")
    assert a.status_code == 200 and a.json()["name"] == b.json()["name"]
    assert len(a.json()["name"].split()) == 2 and a.json()["msisdn"] == "233241112222"
    assert (await api.get("/v1/party-lookups", provider="calbank", msisdn="233241112222")).status_code == 400
    assert (await api.get("/v1/party-lookups", provider="mtn", msisdn="12ab")).status_code == 400
    nope = await api_for(client, ["collections.read"])
    assert (await nope.get("/v1/party-lookups", provider="mtn", msisdn="233241112222")).status_code == 403
