"""The ledger's lighter parse of a transaction page gives the close and the run check exactly the columns the
full `TransactionPage` gives, and checks every amount as strictly."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from payops.connectors.payments import TransactionPage
from payops.connectors.payments.ledger_page import LedgerTransactionPage, cents
from payops.tasks.ledger.run_reconciliation import RecordColumns
from pydantic import ValidationError

ITEMS = [
    {"id": "txn_1", "kind": "payout", "direction": "out", "reference": "may-r2", "amount": "1250.05",
     "currency": "GHS", "status": "delivered", "provider": "mtn", "fee": "12.50", "feeBearer": "business",
     "payerAmount": "1262.55", "recipientAmount": "1250.05", "createdAt": "2026-12-01T09:41:12.123456Z",
     "completedAt": "2026-12-01T09:41:13.5Z", "channel": "api",
     "destination": {"type": "msisdn", "value": "+233241234567"},
     "reconciliation": {"status": "matched", "checkedAt": "2026-12-01T10:00:00Z"}, "somethingNew": [1, 2]},
    {"id": "txn_2", "kind": "collection", "direction": "in", "reference": "inv-7", "amount": "99.99",
     "currency": "GHS", "status": "settled", "fee": "1.00", "feeBearer": "payer", "payerAmount": "100.99",
     "recipientAmount": "99.99", "createdAt": "2026-12-01T09:00:00Z", "completedAt": "2026-12-01T09:00:05Z",
     "reconciliation": {"status": "unchecked"}},
    {"id": "txn_3", "kind": "payout", "direction": "out", "reference": "may-r3", "amount": "0.05",
     "currency": "GHS", "status": "refunded", "fee": "0.00", "createdAt": "2026-12-01T08:00:00Z",
     "compensation": {"type": "wallet_transfer", "reference": "comp-1"},
     "parent": {"type": "payout", "reference": "may-r1"}},
    {"id": "txn_4", "kind": "wallet_transfer", "direction": "in", "reference": "top-up", "amount": 500,
     "currency": "GHS", "status": "completed", "createdAt": "2026-12-01T07:00:00Z"},
    {"id": "txn_5", "kind": "payout", "reference": "may-r4", "amount": "-3.10", "status": "pending"},
]  # fmt: skip


def _page(items: list[dict]) -> bytes:
    return json.dumps({"items": items, "nextCursor": "c1"}).encode()


def test_the_ledger_page_gives_the_columns_the_full_page_gives() -> None:
    full = TransactionPage.model_validate_json(_page(ITEMS))
    lean = LedgerTransactionPage.model_validate_json(_page(ITEMS))
    assert lean.next_cursor == full.next_cursor == "c1"
    from_full, from_lean = RecordColumns(), RecordColumns()
    from_full.add(full.items)
    from_lean.add(lean.items)
    assert from_lean.rows() == from_full.rows()
    assert from_lean.columns["amount_c"] == [125005, 9999, 5, 50000, -310]
    assert from_lean.columns["effect_c"] == [-126255, 9999, -5, 50000, 0]


ODD_AMOUNTS = [12.5, "12.5", "12.505", "1e3", "12,50", "", "NaN", "Infinity", True, None, 0, "-0.00", " 1.00"]


@pytest.mark.parametrize("amount", ODD_AMOUNTS, ids=[repr(a) for a in ODD_AMOUNTS])
def test_an_amount_is_accepted_or_refused_as_the_full_page_does(amount: object) -> None:
    item = {"id": "t", "kind": "payout", "reference": "r", "status": "delivered", "amount": amount}
    try:
        full = TransactionPage.model_validate_json(_page([item])).items[0].amount
    except ValidationError:
        with pytest.raises(ValidationError) as refused:
            LedgerTransactionPage.model_validate_json(_page([item]))
        assert refused.value.errors()[0]["loc"][:3] == ("items", 0, "amount")
        return
    lean = LedgerTransactionPage.model_validate_json(_page([item])).items[0].amount
    assert cents(lean) == cents(full)


def test_a_json_float_is_refused() -> None:
    item = {"id": "t", "kind": "payout", "reference": "r", "status": "delivered", "amount": 12.5}
    with pytest.raises(ValidationError):
        LedgerTransactionPage.model_validate_json(_page([item]))


def test_cents_is_exact_for_every_form_an_amount_takes() -> None:
    listed = ("0.00", "-0.05", "1250.05", "99999999999.99")
    assert [cents(v) for v in listed] == [0, -5, 125005, 9999999999999]
    assert [cents(v) for v in (Decimal("12.34"), Decimal("-0.1"), 7, None)] == [1234, -10, 700, 0]
