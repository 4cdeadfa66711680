"""Result types of the payout sheet intake: the error, the row issue, the valid row and the result."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import overload

from payops.connectors.payments.models import REFERENCE_PATTERN
from payops.tasks.rows.payout_row import PayoutRow, RowIssue

from .errors import IntakeError

__all__ = ["IntakeError", "IntakeResult", "RowTable", "REFERENCE_PATTERN"]


class RowTable(Sequence[dict[str, str]]):
    """The sheet's data rows as ``{column header: cell text, "__row__": row number}``, built on first use.

    Only reports need it, so reading and validating do not pay for 100k dicts up front.
    """

    def __init__(self, columns: Sequence[str], cells: Sequence[Sequence[str]], row_numbers: Sequence[int]):
        self._columns, self._cells, self._row_numbers = list(columns), cells, row_numbers

    @cached_property
    def _rows(self) -> list[dict[str, str]]:
        keys = partial(zip, [*self._columns, "__row__"])
        return list(map(dict, map(keys, zip(*self._cells, map(str, self._row_numbers), strict=True))))

    @overload
    def __getitem__(self, index: int) -> dict[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, str]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, str] | list[dict[str, str]]:
        return self._rows[index]

    def __len__(self) -> int:
        return len(self._row_numbers)

    def __iter__(self) -> Iterator[dict[str, str]]:
        """Each row as a fresh dict, not kept: a report streaming 100k rows holds one at a time."""
        if "_rows" in self.__dict__:
            yield from self._rows
            return
        keys = [*self._columns, "__row__"]
        for values in zip(*self._cells, map(str, self._row_numbers), strict=True):
            yield dict(zip(keys, values, strict=True))


@dataclass
class IntakeResult:
    """What one sheet yielded: valid rows, located problems, and the original table for reports."""

    source: str
    sheet: str | None
    content_sha256: str
    rows: list[PayoutRow] = field(default_factory=list)
    errors: list[RowIssue] = field(default_factory=list)
    warnings: list[RowIssue] = field(default_factory=list)
    rows_total: int = 0
    columns: list[str] = field(default_factory=list)
    table: Sequence[dict[str, str]] = field(default_factory=list)
    """The data rows as read (see :class:`RowTable`), for reports."""
    mapped: dict[str, str] = field(default_factory=dict)
    """Each field's header text (``{"reference": "Payment Reference", ...}``): what a report writes back."""
    ignored: list[str] = field(default_factory=list)
    """Headers mapped to no field, in sheet order: kept in reports, never paid from."""
    currency: str | None = None
    """The sheet's currency (`tasks.intake.columns.ColumnMap`): what rows without a currency cell take."""
    currency_header: str | None = None
    """The amount header ``currency`` was read from (``None``: chosen for the sheet)."""

    @property
    def rows_invalid(self) -> int:
        """Number of distinct rows with at least one error."""
        return len({issue.row for issue in self.errors})
