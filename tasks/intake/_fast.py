"""The intake's speed tricks, in one place: each is measured (`benchmarks/intake.py`, docs/performance.md)
and replaceable by plain code.

- :func:`construct_rows` builds ``PayoutRow``\\ s from already-checked columns with the one trusted-row
  constructor (`tasks.rows.trusted_row`, which a spill's rows are read back with too).
  tests/tasks/intake pins that constructed rows equal ``model_validate``.
- :func:`lines_match` checks a whole column with one regex over its texts joined by line breaks, for the
  common all-valid case (``PLAIN_AMOUNT``, ``GHANA_MSISDN``); callers fall back to per-value parsing.
"""

from __future__ import annotations

import re
from typing import Any

from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.rows.trusted_row import row_constructor

from .raw import joined_lines as joined_lines  # lives in raw.py: the parser child imports it without pydantic

PLAIN_AMOUNT = r"[0-9]{1,15}(?:\.[0-9]{1,2})?"
"""An amount with no marks, separators or sign ([0-9] is also twice as fast as \\d): valid unless zero."""
GHANA_MSISDN = r"0[0-9]{9}|233[0-9]{9}"
"""A local (0…) or international Ghana mobile number, already in its final digits-only form."""


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
