"""Money on the wire: a Decimal written as a decimal string with two places."""

from __future__ import annotations

from decimal import Decimal


def money(value: Decimal) -> str:
    """Decimal string with two places, as the wire wants."""
    return f"{value.quantize(Decimal('0.01'))}"
