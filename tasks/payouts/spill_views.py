"""A run's spill file seen as the sequences and mappings the in-memory run holds, read a chunk at a time.

The payout flow and its reports take the valid rows as a ``Sequence[PayoutRow]``, the sheet as read as a
sequence of ``{header: cell, "__row__": row}`` records, and outcomes and row facts as mappings by sheet row.
For a sheet read into a `RowSpill` (`tasks.intake.streaming`), these views give the same things without
holding them: iteration and slices read chunks in sheet order, and a lookup by row loads the window of rows
around it, so a pass in row order (every report is one) reads each chunk once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar, overload

from payops.tasks.payouts.fee_pricing import FeeRange
from payops.tasks.payouts.spill import RowSpill
from payops.tasks.rows.outcome import RowFacts, RowOutcome, row_fact
from payops.tasks.rows.payout_row import PayoutRow

if TYPE_CHECKING:  # the pre-flight imports Prefect, which `payops check` never loads
    from payops.tasks.rows.name_check import NameCheck

V = TypeVar("V")
WINDOW_ROWS = 5_000
"""Sheet rows loaded by one lookup's window."""


class SpilledRows(Sequence[PayoutRow]):
    """The valid rows of a spill, in sheet order."""

    def __init__(self, spill: RowSpill) -> None:
        self.spill = spill

    def __len__(self) -> int:
        return len(self.spill)

    def __iter__(self) -> Iterator[PayoutRow]:
        return self.spill.rows()

    @overload
    def __getitem__(self, index: int) -> PayoutRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[PayoutRow]: ...
    def __getitem__(self, index: int | slice) -> PayoutRow | list[PayoutRow]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("spilled rows are read in sheet order: no step")
            return list(self.spill.rows(start, stop))
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(index)
        return next(self.spill.rows(position, position + 1))


class SpilledTable(Sequence[dict[str, str]]):
    """Every data row of the sheet as read (valid or not), as ``{header: cell, "__row__": row}`` records."""

    def __init__(self, spill: RowSpill, columns: Sequence[str]) -> None:
        self.spill = spill
        self.keys = [*columns, "__row__"]

    def __len__(self) -> int:
        return self.spill.cell_rows()

    def __iter__(self) -> Iterator[dict[str, str]]:
        return self._records(self.spill.cells())

    def records_of(self, rows: Iterable[int]) -> list[dict[str, str]]:
        """The records of the given sheet rows, by row."""
        return list(self._records(self.spill.cells(rows)))

    @overload
    def __getitem__(self, index: int) -> dict[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, str]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, str] | list[dict[str, str]]:
        """By position, reading from the start (only the first rows are ever asked for: a preview)."""
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            taken = zip(range(stop), self, strict=False)
            return [r for k, r in taken if k >= start and (k - start) % step == 0]
        if index < 0:
            index += len(self)
        for k, record in enumerate(self):
            if k == index:
                return record
        raise IndexError(index)

    def _records(self, cells: Iterator[tuple[int, list[str]]]) -> Iterator[dict[str, str]]:
        keys = self.keys
        for row, values in cells:
            yield dict(zip(keys, [*values, str(row)], strict=True))


class ByRowWindow(Mapping[int, V]):
    """A mapping by sheet row read from the spill a window of rows at a time (``load(first, last)``)."""

    def __init__(
        self,
        load: Callable[[int, int], dict[int, V]],
        rows: Callable[[], Iterator[int]],
        count: Callable[[], int],
    ) -> None:
        self._load, self._rows, self._count = load, rows, count
        self._first, self._last = 1, 0
        self._window: dict[int, V] = {}

    def __getitem__(self, row: int) -> V:
        if not self._first <= row <= self._last:
            self._first, self._last = row, row + WINDOW_ROWS - 1
            self._window = self._load(self._first, self._last)
        return self._window[row]

    def __iter__(self) -> Iterator[int]:
        return self._rows()

    def __len__(self) -> int:
        return self._count()


class SpillSink:
    """Where the pre-flight hands each part's fees and name checks (`tasks.payouts.preflight.PreflightSink`):
    the spill, which sending (fees) and the reports and approval page (name checks) read back."""

    def __init__(self, spill: RowSpill) -> None:
        self.spill = spill

    def fees(self, part: dict[int, FeeRange]) -> None:
        self.spill.add_fees(part)

    def names(self, part: list[NameCheck]) -> None:
        self.spill.add_names(part)


def spilled_names(spill: RowSpill) -> ByRowWindow[NameCheck]:
    """Every row's name check, by sheet row."""
    return ByRowWindow(spill.names_between, spill.name_rows, spill.name_count)


def spilled_outcomes(spill: RowSpill) -> ByRowWindow[RowOutcome]:
    """Every recorded outcome, by sheet row."""
    return ByRowWindow(spill.outcomes_between, lambda: (o.row for o in spill.outcomes()), spill.outcome_count)


def spilled_facts(spill: RowSpill) -> ByRowWindow[RowFacts]:
    """Per valid row: amount, currency and the pre-flight's name check (`run_reports.row_fact`)."""

    def load(first: int, last: int) -> dict[int, RowFacts]:
        checks = spill.names_between(first, last)
        return {r.row: row_fact(r, checks.get(r.row)) for r in spill.rows_between(first, last)}

    return ByRowWindow(load, lambda: (r.row for r in spill.rows()), lambda: len(spill))


class SpilledRun(RowSpill):
    """A run's spill with the row views the send, poll and report path reads (as `HeldRows` offers them for
    a sheet held whole): names, outcomes and facts by sheet row, a window at a time."""

    def forget_states(self) -> None:
        """Nothing to let go: the states are on disk."""

    def name_map(self) -> Mapping[int, NameCheck]:
        return spilled_names(self)

    def outcome_map(self) -> Mapping[int, RowOutcome]:
        return spilled_outcomes(self)

    def fact_map(self) -> Mapping[int, RowFacts]:
        return spilled_facts(self)


__all__ = [
    "ByRowWindow",
    "SpillSink",
    "SpilledRows",
    "SpilledRun",
    "SpilledTable",
    "spilled_facts",
    "spilled_names",
    "spilled_outcomes",
]
