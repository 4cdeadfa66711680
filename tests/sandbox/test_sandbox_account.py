"""Spec § GET /v1/wallet, fee quotes, GET /v1/payment-methods, GET /v1/transactions (filters, paging)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.sandbox.sandbox_support import payout


async def test_wallet(api) -> None:
    body = (await api.get("/v1/wallet")).json()
    assert body == {
        "items": [
            {
                "name": "Demo Business Ltd",
                "balances": {"GHS": "10000000.00"},
                "reserved": {"GHS": "0.00"},
                "createdAt": "2025-03-12T10:00:00.000Z",
            }
        ]
    }


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"amount": "100", "currency": "GHS", "provider": "mtn"},
            {
                "amount": "100.00",
                "currency": "GHS",
                "provider": "mtn",
                "fee": "1.00",
                "feeBearer": "initiator",
                "payerAmount": "101.00",
                "recipientAmount": "100.00",
            },
        ),
        (
            {"amount": "100", "currency": "GHS", "provider": "mtn", "feeBearer": "non_initiator"},
            {
                "amount": "100.00",
                "currency": "GHS",
                "provider": "mtn",
                "fee": "1.00",
                "feeBearer": "non_initiator",
                "payerAmount": "100.00",
                "recipientAmount": "99.00",
            },
        ),
        (
            {"amount": "5000", "currency": "GHS", "provider": "gcb", "destinationType": "account"},
            {
                "amount": "5000.00",
                "currency": "GHS",
                "provider": "gcb",
                "fee": "20.00",
                "feeBearer": "initiator",
                "payerAmount": "5020.00",
                "recipientAmount": "5000.00",
            },
        ),
    ],
)
async def test_payout_fee_quote(api, params, expected) -> None:
    r = await api.get("/v1/fee-quotes/payouts", **params)
    assert r.status_code == 200 and r.json() == expected


async def test_collection_fee_quote(api) -> None:
    r = await api.get("/v1/fee-quotes/collections", amount="200.00", currency="GHS", provider="telecel")
    assert r.json() == {
        "amount": "200.00",
        "currency": "GHS",
        "provider": "telecel",
        "fee": "3.00",
        "feeBearer": "non_initiator",
        "payerAmount": "200.00",
        "recipientAmount": "197.00",
    }
    small = (
        await api.get("/v1/fee-quotes/collections", amount="1.00", currency="GHS", provider="mtn")
    ).json()
    assert small["fee"] == "0.10"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"amount": "10", "currency": "GHS", "provider": "nope"}, "provider"),
        (
            {"amount": "10", "currency": "GHS", "provider": "mtn", "destinationType": "account"},
            "destinationType",
        ),
        ({"amount": "1.5x", "currency": "GHS", "provider": "mtn"}, "amount"),
        ({"amount": "0.40", "currency": "GHS", "provider": "mtn", "feeBearer": "non_initiator"}, "amount"),
        ({"currency": "GHS", "provider": "mtn"}, "amount"),
        ({"amount": "10", "currency": "EUR", "provider": "mtn"}, "currency"),
    ],
)
async def test_fee_quote_refusals(api, params, field) -> None:
    r = await api.get("/v1/fee-quotes/payouts", **params)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(field)


async def test_payment_methods(api, client) -> None:
    items = (await api.get("/v1/payment-methods")).json()["items"]
    assert [i["provider"] for i in items] == [
        "mtn",
        "telecel",
        "airteltigo",
        "calbank",
        "gcb",
        "ecobank",
        "card",
    ]
    assert items[0] == {
        "provider": "mtn",
        "name": "MTN Mobile Money",
        "type": "mobile_money",
        "currencies": ["GHS"],
        "collections": True,
        "payouts": True,
    }
    await client.patch("/_sandbox/businesses/demo/test", json={"providers": ["mtn"]})
    assert [i["provider"] for i in (await api.get("/v1/payment-methods")).json()["items"]] == ["mtn"]
    r = await api.post("/v1/payouts", payout(provider="telecel"))
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("provider")


async def _seed_movements(api, clock) -> None:
    for i in range(7):
        value = "233240000002" if i == 3 else "233241234567"
        await api.post("/v1/payouts", payout(f"t{i}", amount=f"{i + 1}.00", value=value))
        clock.advance(10)
    await api.post("/v1/settlements", {"reference": "stl-1"})
    clock.advance(10)


async def _all_pages(api, **params) -> tuple[list[dict], int]:
    items: list[dict] = []
    pages = 0
    cursor = None
    while True:
        query = dict(params)
        if cursor:
            query["cursor"] = cursor
        body = (await api.get("/v1/transactions", **query)).json()
        pages += 1
        items += body["items"]
        cursor = body.get("nextCursor")
        if not cursor:
            return items, pages


async def test_transactions_newest_first_with_cursor_pages(api, clock) -> None:
    await _seed_movements(api, clock)
    items, pages = await _all_pages(api, limit=3)
    refs = [i["reference"] for i in items]
    assert refs == ["stl-1-2", "stl-1-1", "t6", "t5", "t4", "t3", "t2", "t1", "t0"]
    assert pages == 3
    first = items[-1]
    assert first["id"].startswith("txn_") and first["kind"] == "payout" and first["direction"] == "out"
    last_page = (await api.get("/v1/transactions", limit=100)).json()
    assert "nextCursor" not in last_page and len(last_page["items"]) == 9


@pytest.mark.parametrize(
    ("params", "refs"),
    [
        ({"kind": "settlement"}, ["stl-1-2", "stl-1-1"]),
        ({"kind": "payout", "status": "failed"}, ["t3"]),
        ({"kind": "collection"}, []),
        ({"channel": "api", "kind": "payout", "limit": 2}, ["t6", "t5", "t4", "t3", "t2", "t1", "t0"]),
        ({"reconciliationStatus": "matched", "kind": "payout"}, ["t6", "t5", "t4", "t3", "t2", "t1", "t0"]),
        ({"settlementStatus": "settled"}, []),
        ({"from": "2025-03-12T10:00:20Z", "to": "2025-03-12T10:00:40Z"}, ["t3", "t2"]),
        ({"from": "2025-03-12T10:01:10Z"}, ["stl-1-2", "stl-1-1"]),
    ],
)
async def test_transaction_filters(api, clock, params, refs) -> None:
    await _seed_movements(api, clock)
    items, _ = await _all_pages(api, **params)
    assert [i["reference"] for i in items] == refs


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"kind": "refund"}, "kind"),
        ({"from": "yesterday"}, "from"),
        ({"cursor": "garbage!"}, "cursor"),
        ({"channel": "web"}, "channel"),
        ({"settlementStatus": "done"}, "settlementStatus"),
        ({"reconciliationStatus": "x"}, "reconciliationStatus"),
    ],
)
async def test_transaction_query_validation(api, params, field) -> None:
    r = await api.get("/v1/transactions", **params)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(field), r.text


async def test_time_windows_stay_right_when_the_clock_was_set_back(api, clock, monkeypatch) -> None:
    """The list jumps to a window by creation time while records are in time order; after the clock went
    back it reads every record instead, and the same filters give the same answers."""
    await _seed_movements(api, clock)
    window = {"from": "2025-03-12T10:00:20Z", "to": "2025-03-12T10:00:40Z"}
    assert [i["reference"] for i in (await _all_pages(api, **window))[0]] == ["t3", "t2"]
    # a system clock stepped back to 10:00:05 (a ManualClock never goes back by itself)
    monkeypatch.setattr(clock, "_now", clock.now() - timedelta(seconds=75))
    await api.post("/v1/payouts", payout("late", amount="1.00"))
    items, _ = await _all_pages(api, **{"from": "2025-03-12T10:00:00Z", "to": "2025-03-12T10:00:15Z"})
    assert [i["reference"] for i in items] == ["late", "t1", "t0"]
    assert [i["reference"] for i in (await _all_pages(api, **window))[0]] == ["t3", "t2"]
