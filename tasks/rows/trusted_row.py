"""PayoutRows built from values already checked (the intake's columns, a spill's records): one way to make
them, the fastest that works with the installed pydantic.

:func:`row_constructor` gives one that sets pydantic's four state slots directly: what ``model_construct``
does minus its per-field loop (``model_validate`` and ``model_construct`` cost about a second per 100,000
rows), and every row shares one set of its field names where ``model_construct`` gives each its own
set (about 420 bytes a row: 8 MB for a part of 20,000 rows read back from a spill; docs/performance.md).
Whether this pydantic release still works that way is checked once, lazily, on first use
(:func:`slot_setters_work`); if not, rows are built with ``model_construct``.
tests/tasks/test_trusted_rows.py pins that such rows equal validated ones, read or read back.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import cache
from typing import Any

from payops.tasks.rows.payout_row import PayoutRow
from pydantic import BaseModel

FIELDS = tuple(PayoutRow.model_fields)
"""``PayoutRow``'s fields in order: the order :func:`trusted_row` takes its values in."""
_FIELDS_SET = set(FIELDS)
"""The one set of field names every trusted row shares (every field counts as given). A set, not a frozenset:
pydantic-core reads it as a set (``model_dump(exclude_unset=True)``), and ``model_copy`` copies it before
adding to it; a row is frozen, so nothing adds to it in place."""
_new_row = PayoutRow.__new__
# BaseModel keeps its state in four slots; their descriptors' setters are what model_construct calls, minus
# its per-field loop and attribute lookups (faster than object.__setattr__ by name).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _slot_construct(
    row: int,
    reference: str | None,
    amount: Decimal,
    currency: str,
    provider: str,
    destination_type: str,
    destination: str,
    payee_name: str | None,
    note: str | None,
    extra: dict[str, str],
) -> PayoutRow:
    made = _new_row(PayoutRow)
    _set_dict(
        made,
        {
            "row": row,
            "reference": reference,
            "amount": amount,
            "currency": currency,
            "provider": provider,
            "destination_type": destination_type,
            "destination": destination,
            "payee_name": payee_name,
            "note": note,
            "extra": extra,
        },
    )
    _set_fields_set(made, _FIELDS_SET)
    _set_extra(made, None)
    _set_private(made, None)
    return made


def _model_construct(*values: Any) -> PayoutRow:
    return PayoutRow.model_construct(**dict(zip(FIELDS, values, strict=True)))


@cache
def slot_setters_work() -> bool:
    """True when rows built through the slots equal validated ones (checked once, on first use)."""
    sample = {
        "row": 2,
        "reference": "R1",
        "amount": Decimal("1.00"),
        "currency": "GHS",
        "provider": "mtn",
        "destination_type": "msisdn",
        "destination": "233241234567",
        "payee_name": None,
        "note": None,
        "extra": {},
    }
    try:
        fast = _slot_construct(*sample.values())
        return (
            list(FIELDS) == list(sample)
            and fast == PayoutRow.model_validate(sample)
            and fast.model_dump() == sample
        )
    except (AttributeError, TypeError, KeyError):  # a pydantic release changed its internals
        return False


def row_constructor() -> Callable[..., PayoutRow]:
    """The fastest constructor of trusted rows that works with the installed pydantic: it takes the values
    in `FIELDS` order (row, reference, amount, currency, provider, destination_type, destination,
    payee_name, note, extra)."""
    return _slot_construct if slot_setters_work() else _model_construct
