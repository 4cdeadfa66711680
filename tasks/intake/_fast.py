"""The intake's speed tricks, in one place: each is measured (`benchmarks/intake.py`, docs/performance.md)
and replaceable by plain code.

- :func:`construct_rows` builds ``PayoutRow``\\ s from already-checked columns by setting pydantic's four
  state slots directly: what ``model_construct`` does minus its per-field loop (``model_validate`` and
  ``model_construct`` cost about a second per 100,000 rows). Whether this pydantic release
  still works that way is checked once, lazily, on first use (:func:`slot_setters_work`); if not, rows are
  built with ``model_construct``. tests/tasks/intake pins that constructed rows equal ``model_validate``.
- :func:`lines_match` checks a whole column with one regex over its texts joined by line breaks, for the
  common all-valid case (``PLAIN_AMOUNT``, ``GHANA_MSISDN``); callers fall back to per-value parsing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from functools import cache
from typing import Any

from payops.tasks.rows.payout_row import PayoutRow
from pydantic import BaseModel

from .raw import joined_lines as joined_lines  # lives in raw.py: the parser child imports it without pydantic

PLAIN_AMOUNT = r"[0-9]{1,15}(?:\.[0-9]{1,2})?"
"""An amount with no marks, separators or sign ([0-9] is also twice as fast as \\d): valid unless zero."""
GHANA_MSISDN = r"0[0-9]{9}|233[0-9]{9}"
"""A local (0…) or international Ghana mobile number, already in its final digits-only form."""

_FIELDS = tuple(PayoutRow.model_fields)
_FIELDS_SET = frozenset(_FIELDS)
_new_row = PayoutRow.__new__
# BaseModel keeps its state in four slots; their descriptors' setters are what model_construct calls, minus
# its per-field loop and attribute lookups (faster than object.__setattr__ by name).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _fast_construct(
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
    return PayoutRow.model_construct(**dict(zip(_FIELDS, values, strict=True)))


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
        fast = _fast_construct(*sample.values())
        return (
            list(_FIELDS) == list(sample)
            and fast == PayoutRow.model_validate(sample)
            and fast.model_dump() == sample
        )
    except (AttributeError, TypeError, KeyError):  # a pydantic release changed its internals
        return False


def row_constructor() -> Callable[..., PayoutRow]:
    """The fastest row constructor that works with the installed pydantic."""
    return _fast_construct if slot_setters_work() else _model_construct


def construct_rows(columns: list[list[Any]]) -> list[PayoutRow]:
    """Build PayoutRows from already-validated columns, one list per field in ``PayoutRow.model_fields``
    order (row, reference, amount, currency, provider, destination_type, destination, payee_name, note,
    extra)."""
    return list(map(row_constructor(), *columns))


def lines_match(joined: str | None, pattern: str) -> bool:
    """True when every line of ``joined`` fully matches ``pattern``: one regex pass over a whole column
    instead of one call per cell (the common, all-valid case); callers fall back to per-value parsing."""
    return joined is not None and re.fullmatch(f"(?:(?:{pattern})\n)*(?:{pattern})", joined) is not None


def plain_texts(texts: list[str], limit: int, joined: str | None) -> bool:
    """True when every text is printable (no control characters, no whitespace but single spaces) and at
    most ``limit`` long: such texts need no cleaning. ``str.isprintable`` is stricter than needed (format
    characters, unassigned code points); those texts take the per-value path."""
    if not texts or max(map(len, texts)) > limit:
        return not texts
    return joined is not None and "  " not in joined and joined.replace("\n", " ").isprintable()
