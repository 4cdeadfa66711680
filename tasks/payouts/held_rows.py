"""A sheet held whole, seen through the row views a spill file offers
(`tasks.payouts.spill_views.SpilledRun`), so a held sheet and a spilled one are sent, followed and reported by
one path (`flows.payout_parts`): the held sheet is that path's one part, its rows, states and outcomes in
memory."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from payops.connectors.payments.models import PAYOUT_FINAL_STATUSES
from payops.tasks.payouts.batching import MAX_BATCH
from payops.tasks.payouts.fee_pricing import FeeRange
from payops.tasks.rows.outcome import RowFacts, RowOutcome, row_facts
from payops.tasks.rows.payout_row import PayoutRow

if TYPE_CHECKING:  # the pre-flight and the poll import Prefect, which `payops check` never loads
    from payops.tasks.payouts.polling import PayoutState
    from payops.tasks.rows.name_check import NameCheck


class HeldRows:
    """The valid rows of a sheet held whole, with the pre-flight's fees and name checks, and the states and
    outcomes the run records as it goes: what `RowSpill` holds on disk, held here."""

    def __init__(
        self, rows: Sequence[PayoutRow], fees: Mapping[int, FeeRange], names: Iterable[NameCheck]
    ) -> None:
        self._rows = rows
        self._fees: Mapping[int, FeeRange] = fees
        self._names = {n.row: n for n in names}
        self._states: dict[int, PayoutState] = {}
        self._outcomes: dict[int, RowOutcome] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self, start: int = 0, stop: int | None = None) -> Iterator[PayoutRow]:
        """The valid rows at positions ``start`` to ``stop`` (sheet order)."""
        return iter(self._rows[start:stop])

    def batch_count(self, size: int = MAX_BATCH) -> int:
        return -(-len(self._rows) // size)

    def fees_between(self, first: int, last: int) -> dict[int, FeeRange]:
        """The pre-flight's fees of sheet rows ``first`` to ``last``, read once: the run records them before
        it sends (`tasks.ledger.run_reconciliation.record_approved_payouts`) and never again, so they are let
        go here (~50 MB on 100,000 rows)."""
        fees = {row: fee for row, fee in self._fees.items() if first <= row <= last}
        self._fees = {row: fee for row, fee in self._fees.items() if row not in fees}
        return fees

    def put_states(self, states: Iterable[tuple[int, PayoutState]]) -> None:
        """``(sheet row, its payout's last known state)``; a later state of a row replaces the earlier."""
        self._states.update(states)

    def state_count(self) -> int:
        return len(self._states)

    def forget_states(self) -> None:
        """Following is over: each state is in its row's outcome; let them go before the reports (100,000
        states are ~40 MB)."""
        self._states = {}

    def states_between(self, first: int, last: int) -> dict[int, PayoutState]:
        return {row: s for row, s in self._states.items() if first <= row <= last}

    def states_not_final(self) -> dict[int, PayoutState]:
        """The followed payouts not final at their last known status, by row."""
        return {row: s for row, s in self._states.items() if s.status not in PAYOUT_FINAL_STATUSES}

    def record(self, outcomes: Iterable[RowOutcome]) -> None:
        """Each row's outcome; a later one of a row replaces the earlier."""
        for o in outcomes:
            self._outcomes[o.row] = o

    def outcomes(self) -> Iterator[RowOutcome]:
        """Every recorded outcome, by row."""
        return iter([self._outcomes[row] for row in sorted(self._outcomes)])

    def outcomes_between(self, first: int, last: int) -> dict[int, RowOutcome]:
        return {row: o for row, o in self._outcomes.items() if first <= row <= last}

    def name_map(self) -> Mapping[int, NameCheck]:
        """Every row's name check, by sheet row."""
        return self._names

    def outcome_map(self) -> Mapping[int, RowOutcome]:
        """Every recorded outcome, by sheet row."""
        return self._outcomes

    def fact_map(self) -> Mapping[int, RowFacts]:
        """Per valid row: amount, currency and its name check (`run_reports.row_facts`)."""
        return row_facts(self._rows, self._names.values())
