"""Wire models: money as Decimal/decimal strings, strict requests, tolerant responses."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal

import pytest
from payops.connectors.payments import models as m
from pydantic import ValidationError

from tests.connectors.payments_samples import (
    BATCH_RESULT,
    CHECKOUT,
    COLLECTION,
    EVENT,
    LIMITS,
    PAYOUT,
    SETTLEMENT_RUN,
    TRANSACTION,
    UTILITY_PRODUCT,
    UTILITY_PURCHASE,
)


def payout_request(**over) -> m.PayoutRequest:
    fields = {
        "reference": "po-1",
        "amount": "12.5",
        "currency": "GHS",
        "provider": "mtn",
        "destination": {"type": "msisdn", "value": "233240000000"},
    }
    fields.update(over)
    return m.PayoutRequest.model_validate(fields)


def test_request_wire_body_is_camel_case_with_decimal_strings() -> None:
    req = m.UtilityPurchaseRequest(
        reference="up-1",
        product_id="mtn-airtime",
        amount=Decimal("5"),
        currency="GHS",
        beneficiary=m.Beneficiary(msisdn="233240000000"),
        funding=m.Funding(type="wallet"),
    )
    wire = req.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert wire == {
        "reference": "up-1",
        "productId": "mtn-airtime",
        "amount": "5.00",
        "currency": "GHS",
        "beneficiary": {"msisdn": "233240000000"},
        "funding": {"type": "wallet"},
    }
    assert req.to_wire() == wire  # optional None fields are left out even without exclude_none


def test_request_amount_refuses_json_numbers() -> None:
    doc = {
        "reference": "po-1",
        "amount": 12.5,
        "currency": "GHS",
        "provider": "mtn",
        "destination": {"type": "msisdn", "value": "1"},
    }
    with pytest.raises(ValidationError, match="not a JSON number"):
        m.PayoutRequest.model_validate_json(json.dumps(doc))
    doc["amount"] = 12
    with pytest.raises(ValidationError):
        m.PayoutRequest.model_validate_json(json.dumps(doc))
    doc["amount"] = "12.50"
    assert m.PayoutRequest.model_validate_json(json.dumps(doc)).amount == Decimal("12.50")


@pytest.mark.parametrize("amount", ["0", "0.00", "-1", "1.234", "1e3", "abc", "", " 1", Decimal("1.001")])
def test_request_amount_rules(amount: object) -> None:
    with pytest.raises(ValidationError):
        payout_request(amount=amount)


@pytest.mark.parametrize(
    "amount,wire",
    [
        ("1", "1.00"),
        ("0.5", "0.50"),
        (Decimal("100000.00"), "100000.00"),
        # longer than decimal's default 28 digits once given cents (the fuzzed contract test found it)
        ("1234567890123456789012345678", "1234567890123456789012345678.00"),
        ("12345678901234567890123456789012.5", "12345678901234567890123456789012.50"),
    ],
)
def test_request_amount_accepted(amount: object, wire: str) -> None:
    assert payout_request(amount=amount).to_wire()["amount"] == wire


@pytest.mark.parametrize(
    "over",
    [
        {"reference": "-starts-with-dash"},
        {"reference": "a" * 65},
        {"reference": "has space"},
        {"currency": "ghs"},
        {"currency": "GHSX"},
        {"note": "x" * 51},
        {"note": "line\nbreak"},
        {"note": "bell\x07"},
        {"destination": {"type": "email", "value": "a@b"}},
        {"destination": {"type": "msisdn", "value": ""}},
        {"unknown_field": 1},
    ],
)
def test_payout_request_validation(over: dict) -> None:
    with pytest.raises(ValidationError):
        payout_request(**over)


def test_payout_request_note_and_reference_limits_accept_edges() -> None:
    req = payout_request(reference="A" + "b" * 63, note="n" * 50)
    assert req.note == "n" * 50


def test_batch_size_and_unique_references() -> None:
    items = [payout_request(reference=f"po-{i}") for i in range(100)]
    assert len(m.PayoutBatchRequest(reference="b-1", items=items).items) == 100
    with pytest.raises(ValidationError):
        m.PayoutBatchRequest(reference="b-1", items=[*items, payout_request(reference="po-x")])
    with pytest.raises(ValidationError):
        m.PayoutBatchRequest(reference="b-1", items=[])
    with pytest.raises(ValidationError, match="repeated"):
        m.PayoutBatchRequest(reference="b-1", items=[payout_request(), payout_request()])


def test_other_request_rules() -> None:
    with pytest.raises(ValidationError):
        m.Funding(type="collection")  # needs a payer
    with pytest.raises(ValidationError):
        m.TransferRequest(reference="rvr-1", handle="acme", amount="1", currency="GHS")
    with pytest.raises(ValidationError):
        m.TransferRequest(reference="t-1", handle="h" * 41, amount="1", currency="GHS")
    with pytest.raises(ValidationError):
        m.CheckoutCreate(reference="c-1", currency="GHS", amount_type="fixed")  # fixed needs amount
    with pytest.raises(ValidationError):
        m.SettlementPolicyRequest(
            schedule="daily",
            destinations=[{"type": "bank", "provider": "gcb", "accountNumber": "1", "share": "60"}],
        )
    ok = m.CheckoutCreate(reference="c-1", currency="GHS", amount_type="open", min_amount="1", max_amount="9")
    assert ok.to_wire() == {
        "reference": "c-1",
        "currency": "GHS",
        "amountType": "open",
        "minAmount": "1.00",
        "maxAmount": "9.00",
        "usage": "single",
    }


def test_responses_parse_money_as_decimal_and_keep_unknown_fields_and_enum_values() -> None:
    doc = {**PAYOUT, "status": "queued_for_moon_delivery", "brandNewField": {"x": 1}}
    doc["reconciliation"] = {"status": "quantum_checked"}
    payout = m.Payout.model_validate(doc)
    assert payout.status == "queued_for_moon_delivery"
    assert payout.reconciliation is not None and payout.reconciliation.status == "quantum_checked"
    assert payout.amount == Decimal("12.50") and isinstance(payout.fee, Decimal)
    assert payout.to_wire()["brandNewField"] == {"x": 1}
    tx = m.Transaction.model_validate({**TRANSACTION, "kind": "crypto_swap", "direction": "sideways"})
    assert tx.kind == "crypto_swap"
    product = m.UtilityProduct.model_validate({**UTILITY_PRODUCT, "category": "tv", "kind": "bundle"})
    assert product.category == "tv" and product.min == Decimal("1.00")
    run = m.SettlementRun.model_validate({**SETTLEMENT_RUN, "status": "paused", "outcome": "partially_magic"})
    assert run.outcome == "partially_magic"
    batch = m.PayoutBatchResult.model_validate(BATCH_RESULT)
    assert [i.accepted for i in batch.items] == [True, False]
    assert batch.items[1].error is not None and batch.items[1].error.code == "daily_limit_exceeded"


def test_response_money_refuses_floats() -> None:
    with pytest.raises(ValidationError):
        m.Payout.model_validate({**PAYOUT, "amount": 12.5})


@pytest.mark.parametrize(
    "amount",
    [
        '"12.50"',
        "12",
        '" 7.5 "',
        '"-3.10"',
        '"1e3"',
        "12.5",
        "12.0",
        "1e2",
        '"NaN"',
        '"-Infinity"',
        '"abc"',
        "true",
        '""',
        "null",
        "[]",
    ],
)
def test_response_money_reads_the_wire_as_python_does(amount: str) -> None:
    """A listed page's amounts are checked inside pydantic-core (`_RESPONSE_MONEY_JSON`), a Python value by
    `_parse_response_money`: the two agree on every input, and a JSON float is refused naming its field."""
    wire = '{"reference": "po-1", "status": "accepted", "fee": ' + amount + "}"

    def outcome(parse: Callable[[], m.Payout]) -> object:
        try:
            return parse().fee
        except ValidationError as e:
            return ("refused", e.errors()[0]["loc"])

    from_json = outcome(lambda: m.Payout.model_validate_json(wire))
    assert from_json == outcome(lambda: m.Payout.model_validate(json.loads(wire)))
    if amount in ("12.5", "12.0", "1e2", '"NaN"', '"-Infinity"', '"abc"', "true", '""', "[]"):
        assert from_json == ("refused", ("fee",))
    if amount in ("12.5", "12.0", "1e2", "true", "[]"):  # the refusal says what money must be
        with pytest.raises(ValidationError, match='money must be a decimal string like "12.50"'):
            m.Payout.model_validate_json(wire)


def test_left_out_fields_are_none_and_stay_left_out() -> None:
    payout = m.Payout.model_validate({"reference": "po-1", "status": "accepted"})
    assert payout.fee is None and payout.completed_at is None and payout.parent is None
    assert payout.to_wire() == {"reference": "po-1", "status": "accepted"}


def test_checkout_required_nullable_fields_stay_null_on_the_wire() -> None:
    checkout = m.HostedCheckout.model_validate(CHECKOUT)
    wire = checkout.to_wire()
    assert wire["expiresAt"] is None and wire["minAmount"] is None and wire["collectionReference"] is None
    assert "attempts" not in wire and "description" not in wire
    assert m.HostedCheckout.model_validate(wire) == checkout


def test_limits_and_other_resources_round_trip() -> None:
    limits = m.CurrencyLimitsList.model_validate(LIMITS).items[0]
    assert limits.daily.in_.remaining == Decimal("50.00")
    assert limits.to_wire()["daily"]["in"] == {"used": "0.00", "remaining": "50.00"}
    collection = m.Collection.model_validate(COLLECTION)
    assert collection.settlement_status == "not_eligible"
    purchase = m.UtilityPurchase.model_validate(UTILITY_PURCHASE)
    assert purchase.funding is not None and purchase.funding.type == "wallet"


def test_webhook_envelope_typed_record() -> None:
    envelope = m.WebhookEnvelope.model_validate(EVENT)
    record = envelope.record()
    assert isinstance(record, m.Payout) and record.reference == "po-1"
    settlement = m.WebhookEnvelope.model_validate(
        {
            "id": "e2",
            "type": "settlement.status_changed",
            "data": {k: v for k, v in SETTLEMENT_RUN.items() if k != "id"},
        }
    ).record()
    assert isinstance(settlement, m.SettlementRunEventData) and settlement.id is None
    unknown = m.WebhookEnvelope.model_validate({"id": "e3", "type": "mystery.happened", "data": {"a": 1}})
    assert unknown.record() == {"a": 1}


def test_models_module_imports_pydantic_only() -> None:
    source = open(m.__file__, encoding="utf-8").read()
    assert "import httpx" not in source and "prefect" not in source


def test_openapi_schema_shows_money_as_string() -> None:
    schema = m.HostedCheckout.model_json_schema(mode="serialization")
    assert schema["properties"]["totalCollected"]["type"] == "string"
    assert "expiresAt" in schema["required"]
    req_schema = m.PayoutRequest.model_json_schema()
    assert req_schema["properties"]["amount"]["type"] == "string"
