"""Where intake writes a sheet read a chunk at a time (`tasks.intake.streaming`): its rows, cells and issues,
and the cross-row groupings it asks back. `tasks.payouts.spill.RowSpill` is the one kept on disk."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from payops.tasks.rows.payout_row import PayoutRow, RowIssue


class RowSink(Protocol):
    """The rows of one sheet as intake validates them, chunk by chunk."""

    def __len__(self) -> int:
        """Valid rows so far."""
        ...

    def add_cells(self, rows: Iterable[tuple[int, Iterable[str]]]) -> None:
        """Data rows as read, valid or not: ``(sheet row, its cells in column order)``."""
        ...

    def append(self, rows: Iterable[PayoutRow], destination_cells: Iterable[str]) -> None:
        """Valid rows in sheet order (each with its destination cell as written)."""
        ...

    def add_issues(self, kind: str, found: Iterable[tuple[RowIssue, int]]) -> None:
        """Errors or warnings (``kind``), each with its column's position in the sheet."""
        ...

    def note_references(self, entries: Iterable[tuple[int, str, str]]) -> None:
        """``(row, reference, its cell as written)`` of every row with a readable reference."""
        ...

    def repeated_references(self) -> Iterator[list[tuple[int, str]]]:
        """Groups of ``(row, cell)`` sharing a reference (ignoring case), each in row order."""
        ...

    def repeated_payees(self) -> Iterator[list[tuple[int, str]]]:
        """Groups of valid ``(row, destination cell)`` with the same destination and amount."""
        ...

    def drop(self, rows: Iterable[int]) -> None:
        """Take rows out of the valid ones (refused after the fact)."""
        ...

    def issue_count(self, kind: str) -> int: ...

    def rows_with_errors(self) -> int: ...
