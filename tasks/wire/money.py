"""Money on the wire: a Decimal written as a decimal string with two places."""

from __future__ import annotations

from decimal import Decimal


def money(value: Decimal) -> str:
    """Decimal string with two places, as the wire wants."""
    return f"{value.quantize(Decimal('0.01'))}"


def money_text(value: Decimal | str, currency: str = "") -> str:
    """Money as people read it, one way everywhere (console, Prefect dialog, CLI): ``GHS 1,071,950.20``."""
    amount = Decimal(value).quantize(Decimal("0.01"))
    return f"{currency} {amount:,.2f}".strip()
