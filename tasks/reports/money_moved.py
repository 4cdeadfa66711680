"""What a payout run moved: paid, not paid and fees charged, per currency; the one source of a run's totals.

A run's sheet total (``amount_total``) is what it was approved to pay; what left the wallet is less when rows
failed. Every surface that shows a run's money (the CLI summary and ``--json``, the console's run page, the
xlsx summary sheet, the Prefect artifact, the alerts) reads :class:`MoneyMoved`, built once at the run's end
from every row's outcome:

- **paid**: the rows the service accepted that did not fail: delivered, or still on their way (accepted,
  dispatching, in review, held; ``still_moving`` counts those);
- **not paid**: every other valid row: failed or refunded at the service, refused by it, or never sent;
- **fees**: the fee charged per row (`attention.charged_fee`): the payout's fee while it is paid or on its
  way, ``0`` when the service released it (failed) or gave it back (refunded: amount and fee credited back);
- **wallet effect**: ``-(paid + fees)``, what the run takes from the wallet once its payouts are final. It
  equals the run reconciliation's wallet effect (`tasks.ledger.run_reconciliation`, the service's own
  transactions) when no payout is still moving; the service's payouts are paid by the initiator (amount plus
  fee leave the wallet).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from payops.tasks.reports.attention import charged_fee, paid
from payops.tasks.runtime.plurals import counted
from payops.tasks.wire.money import money, money_text
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:  # `payops runs show` reads `moved_lines` without loading the report writers
    from payops.tasks.rows.outcome import RowFacts, RowOutcome

ZERO = Decimal(0)


class MovedFigures(BaseModel):
    """One currency's figures as a run's summary holds them (``moved``), money as two-decimal strings."""

    model_config = ConfigDict(extra="forbid")

    paid: str
    paid_payouts: int
    still_moving: int
    not_paid: str
    not_paid_payouts: int
    fees: str
    wallet_effect: str


@dataclass
class CurrencyMoved:
    """One currency's figures (:mod:`module docstring <payops.tasks.reports.money_moved>`)."""

    paid: Decimal = ZERO
    paid_payouts: int = 0
    still_moving: int = 0
    not_paid: Decimal = ZERO
    not_paid_payouts: int = 0
    fees: Decimal = ZERO

    @property
    def wallet_effect(self) -> Decimal:
        return -(self.paid + self.fees)

    def figures(self) -> MovedFigures:
        return MovedFigures(
            paid=money(self.paid),
            paid_payouts=self.paid_payouts,
            still_moving=self.still_moving,
            not_paid=money(self.not_paid),
            not_paid_payouts=self.not_paid_payouts,
            fees=money(self.fees),
            wallet_effect=money(self.wallet_effect),
        )


@dataclass
class MoneyMoved:
    """A run's :class:`CurrencyMoved` by currency, added a row at a time (a run of any size: nothing but the
    sums is kept)."""

    currencies: dict[str, CurrencyMoved] = field(default_factory=dict)

    def add(self, o: RowOutcome, facts: RowFacts) -> None:
        """One valid row (its facts hold the amount sent); an invalid row pays nothing and is not counted."""
        if o.submission == "invalid" or facts.amount is None:
            return
        c = self.currencies.setdefault(facts.currency or "", CurrencyMoved())
        verdict = paid(o.submission, o.status)
        if verdict == "no":
            c.not_paid += facts.amount
            c.not_paid_payouts += 1
        else:
            c.paid += facts.amount
            c.paid_payouts += 1
            c.still_moving += verdict == "not yet"
        c.fees += charged_fee(o) or ZERO

    @classmethod
    def of(cls, outcomes: Iterable[RowOutcome], facts: Mapping[int, RowFacts]) -> MoneyMoved:
        moved = cls()
        for o in outcomes:
            f = facts.get(o.row)
            if f is not None:
                moved.add(o, f)
        return moved

    @property
    def fee_total(self) -> Decimal:
        return sum((c.fees for c in self.currencies.values()), ZERO)

    def figures(self) -> dict[str, MovedFigures]:
        """The summary's ``moved`` field: ``{currency: MovedFigures}``."""
        return {cur: c.figures() for cur, c in sorted(self.currencies.items())}


def moved_lines(moved: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """The figures a person reads, a line per currency, from a summary's ``moved`` field: ``paid GHS
    987,582.15 (146 payouts) · not paid GHS 22,203.35 (4 payouts) · fees GHS 2,902.37``."""
    lines = []
    for cur, m in (moved or {}).items():
        line = (
            f"paid {money_text(m['paid'], cur)} ({counted(int(m['paid_payouts']), 'payout')}) · "
            f"not paid {money_text(m['not_paid'], cur)} ({counted(int(m['not_paid_payouts']), 'payout')}) · "
            f"fees {money_text(m['fees'], cur)}"
        )
        if m.get("still_moving"):
            line += f" · {counted(int(m['still_moving']), 'payout')} still on the way"
        lines.append(line)
    return lines


MOVED_HEADERS = ["currency", "paid", "payouts paid", "not paid", "payouts not paid", "fees charged", "wallet"]
"""The columns of a run's money-moved table (the Prefect artifact; the xlsx summary sheet's figures)."""


def moved_rows(moved: Mapping[str, Mapping[str, Any]]) -> list[list[Any]]:
    """A summary's ``moved`` field as rows under `MOVED_HEADERS`."""
    keys = ("paid", "paid_payouts", "not_paid", "not_paid_payouts", "fees", "wallet_effect")
    return [[cur, *(m[k] for k in keys)] for cur, m in moved.items()]
