"""Money helpers and the fee schedule (Decimal only, never float)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

CENT = Decimal("0.01")
ZERO = Decimal("0.00")

PAYOUT_FEE_RATE = Decimal("0.01")
PAYOUT_FEE_MIN = Decimal("0.50")
PAYOUT_FEE_CAP = Decimal("20.00")
COLLECTION_FEE_RATE = Decimal("0.015")
COLLECTION_FEE_MIN = Decimal("0.10")


def q(value: Decimal) -> Decimal:
    """Round half-up to cents."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


@lru_cache(maxsize=65_536)
def fmt(value: Decimal) -> str:
    """Wire string with exactly two decimals (``"12.50"``); cached, as records are rendered again and again.

    Equal amounts share a cache entry (``12.5`` and ``12.50`` hash alike) and give the same text anyway."""
    return format(q(value), "f")


def payout_fee(amount: Decimal) -> Decimal:
    """``max(0.50, round_half_up(amount * 1%))`` capped at 20.00."""
    return min(PAYOUT_FEE_CAP, max(PAYOUT_FEE_MIN, q(amount * PAYOUT_FEE_RATE)))


def collection_fee(amount: Decimal) -> Decimal:
    """``max(0.10, round_half_up(amount * 1.5%))``, no cap."""
    return max(COLLECTION_FEE_MIN, q(amount * COLLECTION_FEE_RATE))


def split_by_fee_bearer(amount: Decimal, fee: Decimal, fee_bearer: str) -> tuple[Decimal, Decimal]:
    """``(payerAmount, recipientAmount)``: initiator pays amount+fee; non_initiator's fee comes off."""
    if fee_bearer == "initiator":
        return q(amount + fee), q(amount)
    return q(amount), q(amount - fee)
