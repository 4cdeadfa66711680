"""Run labels, derived references and batches are pure functions of the label and the sheet."""

from __future__ import annotations

from decimal import Decimal

import pytest
from payops.tasks.payouts.batching import batch_count, build_batch, build_batches
from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.wire.references import (
    REFERENCE_PATTERN,
    batch_reference,
    canonical_json,
    content_label,
    label_slug,
    row_reference,
)


def _rows(n: int) -> list[PayoutRow]:
    return [
        PayoutRow(
            row=i + 2,
            reference=None,
            amount=Decimal("10.50") + i,
            currency="GHS",
            provider="mtn",
            destination_type="msisdn",
            destination=f"23324{i:07d}",
            payee_name=None,
            note=None,
            extra={},
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("label", ["payroll-2026-11", "Payroll Nov 2026 / final", "x" * 200, "---", "é"])
def test_derived_references_always_match_the_spec_pattern(label: str) -> None:
    assert REFERENCE_PATTERN.match(row_reference(label, 200_001))
    assert REFERENCE_PATTERN.match(batch_reference(label, 9999))


def test_distinct_labels_never_share_a_slug() -> None:
    assert label_slug("a b") != label_slug("a-b")
    assert label_slug("x" * 100 + "1") != label_slug("x" * 100 + "2")
    assert label_slug("payroll-2026-11") == "payroll-2026-11"


def test_1050_rows_make_11_batches_of_at_most_100_in_sheet_order() -> None:
    batches = build_batches(_rows(1050), "run")
    assert [len(b.items) for b in batches] == [100] * 10 + [50]
    assert batches[0].rows[0] == 2 and batches[-1].rows[-1] == 1051
    assert len({b.reference for b in batches}) == 11
    assert len({i["reference"] for b in batches for i in b.items}) == 1050


def test_a_batch_built_alone_is_the_one_of_the_whole_sheet() -> None:
    """The flow builds each batch when it sends it: same reference, key and body as the full chunking."""
    rows = _rows(250)
    assert batch_count(rows) == 3 and batch_count([]) == 0
    assert [build_batch(rows, "run", i) for i in range(3)] == build_batches(rows, "run")
    with pytest.raises(IndexError):
        build_batch(rows, "run", 3)


def test_batches_are_byte_identical_on_a_rerun_and_change_with_the_label() -> None:
    a, b = build_batches(_rows(250), "run"), build_batches(_rows(250), "run")
    assert [canonical_json(x.body) for x in a] == [canonical_json(x.body) for x in b]
    assert [x.idempotency_key for x in a] == [x.idempotency_key for x in b]
    other = build_batches(_rows(250), "run-2")
    assert {x.idempotency_key for x in a}.isdisjoint(x.idempotency_key for x in other)
    assert a[0].items[0]["reference"] != other[0].items[0]["reference"]


def test_a_changed_body_gets_a_new_key_but_keeps_its_batch_reference() -> None:
    rows = _rows(3)
    changed = [rows[0].model_copy(update={"amount": Decimal("99.00")}), *rows[1:]]
    a, b = build_batches(rows, "run")[0], build_batches(changed, "run")[0]
    assert a.reference == b.reference and a.idempotency_key != b.idempotency_key


def test_money_goes_on_the_wire_as_two_decimal_strings() -> None:
    item = build_batches(_rows(1), "run")[0].items[0]
    assert item["amount"] == "10.50" and isinstance(item["amount"], str)
    assert item["destination"] == {"type": "msisdn", "value": "233240000000"}


def test_content_label_depends_on_content_only() -> None:
    rows = [(2, None, Decimal("1.00"), "GHS")]
    assert content_label(rows) == content_label(list(rows))
    assert content_label(rows) != content_label([(2, None, Decimal("1.01"), "GHS")])
    assert content_label(rows).startswith("sheet-")
