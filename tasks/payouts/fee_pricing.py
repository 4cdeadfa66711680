"""Pricing a sheet's payouts with few fee quotes: brackets on a fixed amount grid.

What the spec says: `GET /v1/fee-quotes/payouts` "previews the fee on a payout"; its parameters and record
are "not shown", and nothing describes the fee schedule (no rate, minimum or cap). So payops does not compute
fees; it only asks. What it ASSUMES, and nothing more: for one currency, provider and destination type, the
fee never falls as the amount grows (a larger payout never costs less). Under that assumption, for grid
amounts `lo <= amount <= hi`, `fee(lo) <= fee(amount) <= fee(hi)`:

* a row whose two grid fees are equal has that fee, exactly (flat fees, minimums and caps land here);
* any other row's fee is bounded, and the pre-flight checks the balance and headroom with the upper bound,
  which can only over-state what the sheet needs (safe); where the upper bound fails a check, the pre-flight
  quotes those rows' own amounts before reporting a problem (`exact_fees`).

The grid is the same for every sheet (24 steps per decade, in cents), so a payroll of new amounts reuses the
quotes cached from the last run. The assumption is checked on every group's grid quotes: if fees fall as the
amount grows, that group is quoted amount by amount. Fees shown by the pre-flight are then an upper bound; the
fee of each payout comes back with it when it is sent (the run summary's `fee_total` is those).
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

from payops.tasks.rows.payout_row import PayoutRow

CENT = Decimal("0.01")
STEPS_PER_DECADE = 24
PriceKey = tuple[Decimal, str, str, str]  # amount, currency, provider, destination type
#: Fees of distinct priced inputs, in one call (cached or asked); a refused quote is its exception.
QuoteMany = Callable[[list[PriceKey]], Awaitable[dict[PriceKey, Decimal | Exception]]]


@dataclass(frozen=True)
class FeeRange:
    """A row's fee: exact when `low == high`."""

    low: Decimal
    high: Decimal

    @property
    def exact(self) -> bool:
        return self.low == self.high


@functools.cache  # a fractional Decimal power is slow, and a sheet asks for a few dozen distinct steps
def _edge(index: int) -> Decimal:
    """Grid amount number `index`: 10^(index/24) in cents (strictly increasing from 1.00 up)."""
    return (Decimal(10) ** (Decimal(index) / STEPS_PER_DECADE)).quantize(CENT, rounding=ROUND_HALF_EVEN)


def bracket(amount: Decimal) -> tuple[Decimal, Decimal]:
    """Grid amounts `low <= amount <= high` (in cents; both are `amount` below one unit or on the grid)."""
    if amount < 1:
        return amount, amount
    index = math.floor(STEPS_PER_DECADE * math.log10(amount))  # a float only picks the grid step
    while _edge(index) > amount:  # the float's rounding near a grid amount, corrected in Decimal
        index -= 1
    while _edge(index + 1) <= amount:
        index += 1
    low, high = _edge(index), _edge(index + 1)
    return (amount, amount) if amount == low else (low, high)


def _key(row: PayoutRow, amount: Decimal) -> PriceKey:
    return (amount, row.currency, row.provider, row.destination_type)


async def exact_fees(quote_many: QuoteMany, rows: Iterable[PayoutRow]) -> dict[int, FeeRange]:
    """One quote per distinct priced input (amount, currency, provider, destination type)."""
    rows = list(rows)
    fees = await quote_many(list(dict.fromkeys(_key(r, r.amount) for r in rows)))
    out = {}
    for r in rows:
        fee = fees[_key(r, r.amount)]
        if isinstance(fee, Exception):
            raise fee
        out[r.row] = FeeRange(fee, fee)
    return out


def _sound_groups(fees: dict[PriceKey, Decimal | Exception]) -> frozenset[tuple[str, str, str]]:
    """Groups (currency, provider, destination type) whose grid amounts were all priced and whose fees
    never fall as the amount grows (the module's assumption, checked where it can be)."""
    by_group: dict[tuple[str, str, str], list[tuple[Decimal, Decimal | Exception]]] = defaultdict(list)
    for (amount, currency, provider, dtype), fee in fees.items():
        by_group[(currency, provider, dtype)].append((amount, fee))
    sound = set()
    for group, points in by_group.items():
        if any(isinstance(fee, Exception) for _, fee in points):
            continue
        ordered = [fee for _, fee in sorted(points)]
        if all(a <= b for a, b in zip(ordered, ordered[1:], strict=False)):  # type: ignore[operator]
            sound.add(group)
    return frozenset(sound)


def grid_keys(rows: Iterable[PayoutRow]) -> list[PriceKey]:
    """The distinct grid amounts (with their group) that bracket `rows`, in the order first needed: a few
    dozen per group however long the sheet."""
    return list(dict.fromkeys(_key(r, e) for r in rows for e in bracket(r.amount)))


@dataclass(frozen=True)
class Grid:
    """The quotes of a sheet's grid amounts and the groups where the module's assumption holds on them.

    Soundness is a property of the whole sheet's grid quotes, so a sheet priced in parts prices its grid
    first (`price_grid` over `grid_keys` of every row) and then each part against it (`range`)."""

    fees: dict[PriceKey, Decimal | Exception]
    sound: frozenset[tuple[str, str, str]]

    def range(self, row: PayoutRow) -> FeeRange | None:
        """The row's fee between its two grid quotes, or None when its group must be quoted exactly."""
        if (row.currency, row.provider, row.destination_type) not in self.sound:
            return None
        low, high = bracket(row.amount)
        return FeeRange(self.fees[_key(row, low)], self.fees[_key(row, high)])  # type: ignore[arg-type]


async def price_grid(quote_many: QuoteMany, keys: list[PriceKey]) -> Grid:
    """Quote the grid amounts `keys` (from `grid_keys`) in one call."""
    fees = await quote_many(keys)
    return Grid(fees, _sound_groups(fees))


async def bracketed_fees(
    quote_many: QuoteMany, rows: Iterable[PayoutRow], grid: Grid | None = None
) -> dict[int, FeeRange]:
    """Each row's fee between the quotes of its two grid amounts (see the module's assumption); rows of a
    group where the assumption does not hold, or a grid amount was refused, are quoted exactly. `grid`, when
    given, is the whole sheet's (priced once, `rows` being one part of the sheet); else `rows`' own."""
    rows = list(rows)
    if grid is None:
        grid = await price_grid(quote_many, grid_keys(rows))
    out: dict[int, FeeRange] = {}
    rest = []
    for r in rows:
        fee = grid.range(r)
        if fee is None:
            rest.append(r)
        else:
            out[r.row] = fee
    if rest:
        out.update(await exact_fees(quote_many, rest))
    return out
