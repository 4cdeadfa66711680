"""Spec § POST /v1/payouts, GET /v1/payouts/{reference}; contract test values, fees, ledger and events."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.sandbox.sandbox_support import payout

INVALID = [
    ({"amount": 10}, "amount"),
    ({"amount": 10.5}, "amount"),
    ({"amount": "10.001"}, "amount"),
    ({"amount": "-1.00"}, "amount"),
    ({"amount": "0"}, "amount"),
    ({"amount": "1e3"}, "amount"),
    ({"currency": "ghs"}, "currency"),
    ({"currency": "GHSS"}, "currency"),
    ({"currency": "USD"}, "currency"),
    ({"reference": "-starts-with-dash"}, "reference"),
    ({"reference": "has space"}, "reference"),
    ({"reference": "x" * 65}, "reference"),
    ({"provider": "paypal"}, "provider"),
    ({"destination": {"type": "iban", "value": "123"}}, "destination.type"),
    ({"destination": {"type": "account", "value": "1234567890"}}, "destination.type"),  # mtn pays to msisdn
    ({"destination": {"type": "msisdn", "value": "12ab"}}, "destination.value"),
    ({"destination": {"type": "msisdn"}}, "destination.value"),
    ({"note": "n" * 51}, "note"),
    ({"note": "bad\nnote"}, "note"),
    ({"note": "bell\x07"}, "note"),
    ({"feeBearer": "non_initiator"}, "feeBearer"),
]


@pytest.mark.parametrize(("change", "field"), INVALID)
async def test_invalid_payout_is_400_naming_the_field(api, demo, change, field) -> None:
    r = await api.post("/v1/payouts", payout(**change) if "reference" in change else {**payout(), **change})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_input" and err["message"].startswith(field), err
    assert not demo.payouts


@pytest.mark.parametrize("missing", ["reference", "amount", "currency", "provider", "destination"])
async def test_missing_field_is_400(api, missing) -> None:
    body = payout()
    del body[missing]
    r = await api.post("/v1/payouts", body)
    assert r.status_code == 400 and r.json()["error"]["message"] == f"{missing}: field required"


async def test_note_of_50_chars_and_other_destinations_are_accepted(api) -> None:
    assert (await api.post("/v1/payouts", payout(note="n" * 50))).status_code == 202
    bank = payout(provider="gcb", dtype="account", value="1234567890")
    assert (await api.post("/v1/payouts", bank)).status_code == 202
    card = payout(provider="card", dtype="card", value="card_tok_4242")
    assert (await api.post("/v1/payouts", card)).status_code == 202


async def test_accepted_payout_record(api) -> None:
    r = await api.post("/v1/payouts", payout("rec-1", amount="250.00", note="salary"))
    assert r.status_code == 202
    assert r.json() == {
        "reference": "rec-1",
        "amount": "250.00",
        "currency": "GHS",
        "status": "accepted",
        "provider": "mtn",
        "fee": "2.50",
        "feeBearer": "initiator",
        "payerAmount": "252.50",
        "recipientAmount": "250.00",
        "note": "salary",
        "createdAt": "2025-03-12T10:00:00.000Z",
        "channel": "api",
        "reconciliation": {"status": "unchecked"},
    }


@pytest.mark.parametrize(
    ("amount", "fee"),
    [
        ("1.00", "0.50"),
        ("50.00", "0.50"),
        ("50.49", "0.50"),
        ("50.50", "0.51"),
        ("123.45", "1.23"),
        ("2000.00", "20.00"),
        ("99999.99", "20.00"),
    ],
)
async def test_fee_schedule(api, amount, fee) -> None:
    r = await api.post("/v1/payouts", payout(amount=amount))
    body = r.json()
    assert body["fee"] == fee
    assert Decimal(body["payerAmount"]) == Decimal(amount) + Decimal(fee)


LIFECYCLES = [
    ("233241230009", ["dispatching", "delivered"], None),
    ("233241230001", ["dispatching", "failed"], "insufficient_funds_at_provider"),
    ("233241230002", ["dispatching", "failed"], "account_not_found"),
    ("233241230003", ["in_review", "delivered"], None),
    ("233241230004", ["held", "held"], None),
    ("233241230005", ["dispatching", "delivered", "refunded"], None),
    ("233241230006", ["dispatching", "dispatching"], None),
    ("233241230007", ["in_review", "in_review"], None),
]


@pytest.mark.parametrize(("value", "statuses", "reason"), LIFECYCLES)
async def test_test_values_drive_the_lifecycle(api, clock, value, statuses, reason) -> None:
    ref = f"life-{value[-4:]}"
    assert (await api.post("/v1/payouts", payout(ref, value=value))).json()["status"] == "accepted"
    seen = []
    for _ in statuses:
        clock.advance(1.0)  # delivery_delay 2 s: a step every 1 s
        seen.append((await api.get(f"/v1/payouts/{ref}")).json())
    assert [p["status"] for p in seen] == statuses
    final = seen[-1]
    if final["status"] in {"delivered", "failed", "refunded"}:
        assert (
            final["completedAt"]
            == {2: "2025-03-12T10:00:02.000Z", 3: "2025-03-12T10:00:03.000Z"}[len(statuses)]
        )
        assert final["reconciliation"]["status"] == "matched"
    else:
        assert "completedAt" not in final
    assert final.get("failureReason") == reason
    assert "completedAt" not in seen[0]


async def test_get_payout_404_and_400(api) -> None:
    r = await api.get("/v1/payouts/unknown-ref")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = await api.get("/v1/payouts/bad%20ref")
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("reference")


async def test_ledger_reserve_debit_release_refund(api, clock, demo) -> None:
    start = demo.wallet.available["GHS"]
    await api.post("/v1/payouts", payout("ok", amount="100.00"))  # 101.00 with fee
    await api.post("/v1/payouts", payout("fails", amount="100.00", value="233240000001"))
    await api.post("/v1/payouts", payout("refunds", amount="100.00", value="233240000005"))
    wallet = (await api.get("/v1/wallet")).json()["items"][0]
    assert wallet["reserved"]["GHS"] == "303.00"
    assert Decimal(wallet["balances"]["GHS"]) == start - Decimal("303.00")
    clock.advance(2)
    wallet = (await api.get("/v1/wallet")).json()["items"][0]
    assert wallet["reserved"]["GHS"] == "0.00"
    assert Decimal(wallet["balances"]["GHS"]) == start - Decimal("202.00")  # failed one released
    clock.advance(1)
    wallet = (await api.get("/v1/wallet")).json()["items"][0]
    assert Decimal(wallet["balances"]["GHS"]) == start - Decimal("101.00")  # refunded one returned
    assert demo.wallet.balanced()


async def test_events_recorded_for_every_status_change(api, clock, demo) -> None:
    await api.post("/v1/payouts", payout("ev", value="233240000005"))
    clock.advance(3)
    await api.get("/v1/payouts/ev")
    types = [(e.type, e.data["status"]) for e in demo.events]
    assert types == [
        ("payout.accepted", "accepted"),
        ("payout.status_changed", "dispatching"),
        ("payout.status_changed", "delivered"),
        ("payout.status_changed", "refunded"),
    ]
    assert [e.created_at.second for e in demo.events] == [0, 1, 2, 3]
    assert all(e.id.startswith("evt_") for e in demo.events)
    assert demo.events[-1].to_wire()["data"]["reference"] == "ev"


async def test_event_hook_is_called(api, state) -> None:
    seen = []
    state.event_hooks.append(lambda env, event: seen.append((env.key, event.type)))
    await api.post("/v1/payouts", payout())
    assert seen == [(("demo", "test"), "payout.accepted")]
