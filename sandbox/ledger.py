"""The wallet ledger: available and reserved balances per currency, with a journal of every move.

Invariant (checked by ``Wallet.balanced``): for each currency
``available + reserved == credited - debited``; money only enters by ``credit`` and leaves by ``debit``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from .money import ZERO, fmt


class InsufficientFunds(Exception):
    """The available balance does not cover a reservation."""


@dataclass(frozen=True)
class JournalEntry:
    """One move of money: ``kind`` is credit, reserve, release, debit or debit_available."""

    seq: int
    at: datetime
    kind: str
    currency: str
    amount: Decimal
    reference: str


@dataclass
class Wallet:
    """A business's wallet account in one environment."""

    name: str
    created_at: datetime
    available: dict[str, Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    reserved: dict[str, Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    credited: dict[str, Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    debited: dict[str, Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    journal: list[JournalEntry] = field(default_factory=list)

    def _log(self, at: datetime, kind: str, currency: str, amount: Decimal, reference: str) -> None:
        if amount < 0:
            raise ValueError("ledger amounts are positive")
        self.journal.append(JournalEntry(len(self.journal) + 1, at, kind, currency, amount, reference))

    def credit(self, currency: str, amount: Decimal, at: datetime, reference: str) -> None:
        """Money enters the wallet (funding, collections, refunds of delivered payouts)."""
        self._log(at, "credit", currency, amount, reference)
        self.available[currency] += amount
        self.credited[currency] += amount

    def reserve(self, currency: str, amount: Decimal, at: datetime, reference: str) -> None:
        """Set money aside for a request in progress; raises ``InsufficientFunds``."""
        if self.available[currency] < amount:
            raise InsufficientFunds(f"available {fmt(self.available[currency])} < {fmt(amount)}")
        self._log(at, "reserve", currency, amount, reference)
        self.available[currency] -= amount
        self.reserved[currency] += amount

    def release(self, currency: str, amount: Decimal, at: datetime, reference: str) -> None:
        """Return reserved money to the available balance (failed request)."""
        self._check_reserved(currency, amount)
        self._log(at, "release", currency, amount, reference)
        self.reserved[currency] -= amount
        self.available[currency] += amount

    def debit(self, currency: str, amount: Decimal, at: datetime, reference: str) -> None:
        """Reserved money leaves the wallet (delivered payout, settled payment)."""
        self._check_reserved(currency, amount)
        self._log(at, "debit", currency, amount, reference)
        self.reserved[currency] -= amount
        self.debited[currency] += amount

    def debit_available(self, currency: str, amount: Decimal, at: datetime, reference: str) -> None:
        """Money leaves straight from the available balance (one-request moves such as transfers)."""
        if self.available[currency] < amount:
            raise InsufficientFunds(f"available {fmt(self.available[currency])} < {fmt(amount)}")
        self._log(at, "debit_available", currency, amount, reference)
        self.available[currency] -= amount
        self.debited[currency] += amount

    def _check_reserved(self, currency: str, amount: Decimal) -> None:
        if self.reserved[currency] < amount:
            raise RuntimeError(f"ledger error: reserved {self.reserved[currency]} < {amount}")

    def currencies(self) -> list[str]:
        """Every currency the wallet has seen, sorted."""
        return sorted(set(self.available) | set(self.reserved) | set(self.credited))

    def balanced(self) -> bool:
        """True when no money was created or lost in any currency."""
        return all(
            self.available[c] + self.reserved[c] == self.credited[c] - self.debited[c]
            and self.available[c] >= 0
            and self.reserved[c] >= 0
            for c in self.currencies()
        )

    def to_wire(self) -> dict[str, object]:
        """The wallet account record: ``balances`` are the available amounts, ``reserved`` the held ones."""
        cur = self.currencies()
        return {
            "name": self.name,
            "balances": {c: fmt(self.available[c]) for c in cur},
            "reserved": {c: fmt(self.reserved[c]) for c in cur},
            "createdAt": self.created_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }

    def totals(self) -> dict[str, dict[str, str]]:
        """Per currency: available, reserved, credited, debited (admin stats)."""
        return {
            c: {
                "available": fmt(self.available[c]),
                "reserved": fmt(self.reserved[c]),
                "credited": fmt(self.credited[c]),
                "debited": fmt(self.debited[c]),
            }
            for c in self.currencies()
        }
