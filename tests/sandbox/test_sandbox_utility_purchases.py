"""Spec § Utilities: products, fee quotes, purchases (wallet and collection funding), all nine statuses,
the 404/422/503 refusals, money, limits, events and the transaction list."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.sandbox.sandbox_support import api_for, ref


def purchase(
    product: str = "mtn-airtime",
    amount: str = "20.00",
    msisdn: str = "233241234567",
    funding: dict | None = None,
    **extra,
) -> dict:
    return {
        "reference": ref("u"),
        "productId": product,
        "amount": amount,
        "currency": "GHS",
        "beneficiary": {"msisdn": msisdn},
        "funding": funding or {"type": "wallet"},
        **extra,
    }


async def statuses(api, clock, reference: str, steps: int, dt: float = 1.0) -> list[str]:
    out = []
    for _ in range(steps):
        clock.advance(dt)
        out.append((await api.get(f"/v1/utility-purchases/{reference}")).json()["status"])
    return out


async def test_product_list(api) -> None:
    items = (await api.get("/v1/utility-products")).json()["items"]
    assert {p["category"] for p in items} == {"airtime", "data"}
    assert {p["network"] for p in items} == {"mtn", "telecel", "airteltigo"}
    assert {p["delivery"] for p in items} == {"verified", "unverified"}
    for p in items:
        assert p["currency"] == "GHS"
        assert ("price" in p) == (p["kind"] == "fixed") and ("min" in p and "max" in p) == (
            p["kind"] == "flexi"
        )
    assert any("validity" in p for p in items)


async def test_fee_quote(api, client) -> None:
    r = await api.get("/v1/fee-quotes/utilities", productId="mtn-airtime", amount="50", currency="GHS")
    assert r.status_code == 200
    assert r.json() == {
        "productId": "mtn-airtime",
        "amount": "50.00",
        "currency": "GHS",
        "fee": "0.50",
        "gross": "50.50",
    }
    small = (
        await api.get("/v1/fee-quotes/utilities", productId="mtn-airtime", amount="2.00", currency="GHS")
    ).json()
    assert small["fee"] == "0.10"
    reader = await api_for(client, ["disbursements.read"])
    assert (
        await reader.get("/v1/fee-quotes/utilities", productId="mtn-airtime", amount="5", currency="GHS")
    ).status_code == 403


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"productId": "nope"}, 404, "product_not_found"),
        ({"productId": "mtn-data-legacy", "amount": "8.00"}, 422, "product_not_sellable"),
        ({"productId": "mtn-data-1gb", "amount": "11.00"}, 422, "amount_out_of_range"),
        ({"amount": "1000.01"}, 422, "amount_out_of_range"),
        ({"currency": "USD"}, 422, "currency_not_supported"),
        ({"amount": "999.99"}, 422, "fee_unpriceable"),
        ({"productId": "mtn-airtime-offline"}, 503, "utilities_unavailable"),
    ],
)
async def test_quote_and_purchase_refusals(api, params, status, code) -> None:
    q = {"productId": "mtn-airtime", "amount": "20.00", "currency": "GHS", **params}
    r = await api.get("/v1/fee-quotes/utilities", **q)
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    body = purchase(product=q["productId"], amount=q["amount"], currency=q["currency"])
    r = await api.post("/v1/utility-purchases", body)
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    assert (await api.get(f"/v1/utility-purchases/{body['reference']}")).status_code == 404


@pytest.mark.parametrize(
    ("msisdn", "status", "code"),
    [
        ("233201234567", 422, "beneficiary_invalid"),  # telecel number, mtn product
        ("23324123456", 422, "beneficiary_invalid"),
        ("233241230422", 422, "beneficiary_invalid"),
        ("233241230503", 503, "utilities_unavailable"),
    ],
)
async def test_beneficiary_test_values(api, msisdn, status, code) -> None:
    r = await api.post("/v1/utility-purchases", purchase(msisdn=msisdn))
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)


async def test_wallet_purchase_delivered_money_and_events(api, clock, demo) -> None:
    before = demo.wallet.available["GHS"]
    body = purchase(amount="20.00")
    r = await api.post("/v1/utility-purchases", body)
    assert r.status_code == 202, r.text
    got = r.json()
    assert got["status"] == "accepted" and got["fee"] == "0.20" and got["gross"] == "20.20"
    assert got["product"] == {
        "id": "mtn-airtime",
        "category": "airtime",
        "network": "mtn",
        "name": "MTN airtime",
    }
    assert got["funding"] == {"type": "wallet"} and got["beneficiary"] == {"msisdn": "233241234567"}
    assert demo.wallet.reserved["GHS"] == Decimal("20.20")
    assert await statuses(api, clock, body["reference"], 2) == ["vending", "delivered"]
    assert demo.wallet.available["GHS"] == before - Decimal("20.20") and demo.wallet.reserved["GHS"] == 0
    types = [e.type for e in demo.events if e.data.get("reference") == body["reference"]]
    assert types == ["utility_purchase.accepted"] + ["utility_purchase.status_changed"] * 2
    tx = (await api.get("/v1/transactions", kind="utility")).json()["items"]
    assert [(t["reference"], t["status"], t["direction"]) for t in tx] == [
        (body["reference"], "delivered", "out")
    ]


@pytest.mark.parametrize(
    ("suffix", "path", "reason", "final_reserved"),
    [
        ("0001", ["vending", "failed", "failed"], "vend_failed", "0"),
        ("0002", ["vending", "refunding", "refunded"], "vend_failed", "0"),
        ("0003", ["vending", "outcome_unknown", "outcome_unknown", "delivered"], None, "0"),
        ("0004", ["vending", "outcome_unknown", "outcome_unknown", "outcome_unknown"], None, "10.10"),
        ("0005", ["vending", "refunding", "refund_failed", "refund_failed"], "vend_failed", "10.10"),
        (
            "0006",
            ["vending", "refunding", "refund_failed", "refund_failed", "refund_failed", "refunded"],
            "vend_failed",
            "0",
        ),
    ],
)
async def test_statuses_by_beneficiary_test_value(
    api, clock, demo, suffix, path, reason, final_reserved
) -> None:
    before = demo.wallet.available["GHS"]
    body = purchase(amount="10.00", msisdn=f"23324123{suffix}")
    await api.post("/v1/utility-purchases", body)
    assert await statuses(api, clock, body["reference"], len(path)) == path  # one step per second
    got = (await api.get(f"/v1/utility-purchases/{body['reference']}")).json()
    assert got.get("failureReason") == reason
    assert demo.wallet.reserved["GHS"] == Decimal(final_reserved)
    spent = Decimal("10.10") if path[-1] in {"delivered", "outcome_unknown", "refund_failed"} else Decimal(0)
    assert demo.wallet.available["GHS"] == before - spent
    assert demo.wallet.balanced()


async def test_collection_funded_purchase(api, clock, demo) -> None:
    before = demo.wallet.available["GHS"]
    body = purchase(
        amount="10.00",
        funding={"type": "collection", "payer": {"provider": "telecel", "msisdn": "233201112222"}},
    )
    r = await api.post("/v1/utility-purchases", body)
    assert r.status_code == 202 and r.json()["funding"]["payer"] == {
        "provider": "telecel",
        "msisdn": "233201112222",
    }
    seen = await statuses(api, clock, body["reference"], 4)  # paid at +2 s, sale starts then
    assert seen == ["awaiting_payment", "awaiting_payment", "vending", "delivered"]
    assert (
        demo.wallet.available["GHS"] == before and demo.wallet.balanced()
    )  # payer paid gross, vendor got it
    cols = (await api.get("/v1/transactions", kind="collection")).json()["items"]
    assert len(cols) == 1 and cols[0]["amount"] == "10.10" and cols[0]["status"] == "settled"
    assert cols[0]["settlementStatus"] == "not_eligible"


@pytest.mark.parametrize(
    ("payer", "reason"), [("233201110001", "payment_failed"), ("233201110008", "payment_expired")]
)
async def test_payer_who_does_not_pay(api, clock, demo, payer, reason) -> None:
    before = demo.wallet.available["GHS"]
    body = purchase(funding={"type": "collection", "payer": {"provider": "telecel", "msisdn": payer}})
    await api.post("/v1/utility-purchases", body)
    clock.advance(2)
    got = (await api.get(f"/v1/utility-purchases/{body['reference']}")).json()
    assert got["status"] == "failed" and got["failureReason"] == reason
    assert demo.wallet.available["GHS"] == before


async def test_collection_funded_refund_goes_back_to_payer(api, clock, demo) -> None:
    before = demo.wallet.available["GHS"]
    body = purchase(
        amount="10.00",
        msisdn="233241230002",
        funding={"type": "collection", "payer": {"provider": "mtn", "msisdn": "233241119999"}},
    )
    await api.post("/v1/utility-purchases", body)
    clock.advance(5)
    got = (await api.get(f"/v1/utility-purchases/{body['reference']}")).json()
    assert got["status"] == "refunded"
    assert (
        demo.wallet.available["GHS"] == before and demo.wallet.reserved["GHS"] == 0 and demo.wallet.balanced()
    )


async def test_invalid_requests(api) -> None:
    r = await api.post("/v1/utility-purchases", purchase(funding={"type": "collection"}))
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("funding")
    r = await api.post(
        "/v1/utility-purchases",
        purchase(funding={"type": "collection", "payer": {"provider": "calbank", "msisdn": "233241119999"}}),
    )
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("funding.payer.provider")
    r = await api.post("/v1/utility-purchases", purchase(amount=20))
    assert r.status_code == 400


async def test_insufficient_wallet_fails_with_reason(client, clock, state) -> None:
    api = await api_for(client, ["disbursements.write", "disbursements.read"], business="acme")
    wallet = state.env("acme", "test").wallet
    wallet.reserve("GHS", wallet.available["GHS"] - Decimal("5.00"), clock.now(), "held-elsewhere")
    body = purchase(amount="5.00", product="airteltigo-airtime", msisdn="233261234567")  # gross 5.10 > 5.00
    assert (await api.post("/v1/utility-purchases", body)).status_code == 202
    clock.advance(1)
    got = (await api.get(f"/v1/utility-purchases/{body['reference']}")).json()
    assert got["status"] == "failed" and got["failureReason"] == "insufficient_balance"
    assert wallet.available["GHS"] == Decimal("5.00") and wallet.balanced()


async def test_idempotency_and_duplicate_reference(api, demo) -> None:
    body = purchase()
    a = await api.post("/v1/utility-purchases", body, key="k-u")
    b = await api.post("/v1/utility-purchases", body, key="k-u")
    assert a.content == b.content and demo.wallet.reserved["GHS"] == Decimal("20.20")
    clash = await api.post("/v1/utility-purchases", {**body, "amount": "21.00"})
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "duplicate_reference"
