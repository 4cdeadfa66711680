"""Chunk validated rows into payout batches of at most 100, with stable references and keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.wire.money import money
from payops.tasks.wire.references import batch_idempotency_key, batch_reference, payout_reference

MAX_BATCH = 100


@dataclass(frozen=True)
class PayoutBatch:
    """One `POST /v1/payout-batches` request, fully determined by the label and the rows."""

    index: int
    reference: str
    idempotency_key: str
    items: list[dict[str, Any]]
    rows: list[int] = field(default_factory=list)

    @property
    def body(self) -> dict[str, Any]:
        return {"reference": self.reference, "items": self.items}


def payout_item(row: PayoutRow, label: str) -> dict[str, Any]:
    """Wire body of one payout item (camelCase, money as decimal strings)."""
    item: dict[str, Any] = {
        "reference": payout_reference(row, label),
        "amount": money(row.amount),
        "currency": row.currency,
        "provider": row.provider,
        "destination": {"type": row.destination_type, "value": row.destination},
    }
    if row.note:
        item["note"] = row.note
    return item


def batch_count(rows: Sequence[PayoutRow], size: int = MAX_BATCH) -> int:
    """How many batches :func:`build_batches` makes of ``rows``."""
    if not 1 <= size <= MAX_BATCH:
        raise ValueError(f"batch size must be 1..{MAX_BATCH}, got {size}")
    return -(-len(rows) // size)


def build_batch(rows: Sequence[PayoutRow], label: str, index: int, size: int = MAX_BATCH) -> PayoutBatch:
    """Batch ``index`` of :func:`build_batches` alone: a run builds each just before sending it, so the wire
    bodies of a large sheet are never all held at once (docs/performance.md, *Memory at 100,000 rows*)."""
    if not 0 <= index < batch_count(rows, size):
        raise IndexError(f"batch {index} of {batch_count(rows, size)}")
    return batch_of(rows[index * size : (index + 1) * size], label, index)


def batch_of(chunk: Sequence[PayoutRow], label: str, index: int) -> PayoutBatch:
    """Batch ``index`` holding these rows (the ``index``-th chunk of the valid rows, wherever they are kept:
    a list, or a spill file, `tasks.payouts.spill`)."""
    items = [payout_item(r, label) for r in chunk]
    ref = batch_reference(label, index)
    key = batch_idempotency_key(label, index, {"reference": ref, "items": items})
    return PayoutBatch(index, ref, key, items, [r.row for r in chunk])


def build_batches(rows: Sequence[PayoutRow], label: str, size: int = MAX_BATCH) -> list[PayoutBatch]:
    """Consecutive valid rows in chunks of at most `size` (a pure function of rows and label)."""
    return [build_batch(rows, label, i, size) for i in range(batch_count(rows, size))]
