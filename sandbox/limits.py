"""Payment limits: per transaction, daily and monthly per currency; in and out counted separately.

Days and months follow the Africa/Accra calendar. Usage counts the ``amount`` (not the fee) of every
accepted movement; a movement that fails gives its usage back.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from .errors import ApiError
from .money import ZERO, fmt

ACCRA = ZoneInfo("Africa/Accra")


@dataclass(frozen=True)
class CurrencyLimit:
    """The limits of one currency."""

    per_transaction: Decimal
    daily: Decimal
    monthly: Decimal


@lru_cache(maxsize=1024)
def day_key(at: datetime) -> str:
    """Accra calendar day of ``at``."""
    return at.astimezone(ACCRA).strftime("%Y-%m-%d")


@lru_cache(maxsize=1024)
def month_key(at: datetime) -> str:
    """Accra calendar month of ``at``."""
    return at.astimezone(ACCRA).strftime("%Y-%m")


@dataclass
class LimitBook:
    """Limits and their usage for one business environment."""

    limits: dict[str, CurrencyLimit] = field(default_factory=dict)
    unusable: bool = False
    usage: dict[tuple[str, str, str], Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))

    def check(self, currency: str, direction: str, amount: Decimal, at: datetime) -> None:
        """Raise the 403 a payment of ``amount`` would be refused with, if any."""
        if self.unusable:
            raise ApiError(403, "limits_unusable", "limits could not be used; try again later")
        if not self.limits:
            raise ApiError(403, "limits_missing", "no limits are set: no payment can be made")
        limit = self.limits.get(currency)
        if limit is None:
            raise ApiError(403, "limits_missing", f"no limits are set for {currency}")
        if amount > limit.per_transaction:
            raise ApiError(
                403,
                "transaction_limit_exceeded",
                f"amount is over the per-transaction limit {fmt(limit.per_transaction)}",
            )
        if self.usage[(currency, direction, day_key(at))] + amount > limit.daily:
            raise ApiError(403, "daily_limit_exceeded", f"daily {direction} limit {fmt(limit.daily)} reached")
        if self.usage[(currency, direction, month_key(at))] + amount > limit.monthly:
            raise ApiError(
                403, "monthly_limit_exceeded", f"monthly {direction} limit {fmt(limit.monthly)} reached"
            )

    def add(self, currency: str, direction: str, amount: Decimal, at: datetime) -> None:
        """Count ``amount`` against the day and month of ``at``."""
        self.usage[(currency, direction, day_key(at))] += amount
        self.usage[(currency, direction, month_key(at))] += amount

    def remove(self, currency: str, direction: str, amount: Decimal, at: datetime) -> None:
        """Give back usage counted at ``at`` (a failed movement)."""
        self.usage[(currency, direction, day_key(at))] -= amount
        self.usage[(currency, direction, month_key(at))] -= amount

    def to_wire(self, at: datetime) -> list[dict[str, Any]]:
        """Items of ``GET /v1/limits`` with used and remaining for the current day and month."""
        items = []
        for currency in sorted(self.limits):
            limit = self.limits[currency]
            items.append(
                {
                    "currency": currency,
                    "perTransaction": fmt(limit.per_transaction),
                    "daily": self._period(currency, "daily", limit.daily, day_key(at)),
                    "monthly": self._period(currency, "monthly", limit.monthly, month_key(at)),
                }
            )
        return items

    def _period(self, currency: str, period: str, limit: Decimal, key: str) -> dict[str, Any]:
        out: dict[str, Any] = {"period": period, "limit": fmt(limit)}
        for direction in ("in", "out"):
            used = self.usage[(currency, direction, key)]
            out[direction] = {"used": fmt(used), "remaining": fmt(max(ZERO, limit - used))}
        return out
