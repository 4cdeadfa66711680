"""A payout run's side of retrying while it runs: its failed and refused rows recorded as they happen, where a
retry reads them (`store.retries`), and, when it reports, the rows a retry claimed meanwhile.

Each row is recorded as its resubmit row (`tasks.reports.run_reports.resubmit_rows`: the sheet's own cells and
columns, the fresh reference a retry sends), so a retry started while the run polls pays exactly what the
run's resubmit sheet would have carried. A row a retry claimed is left out of the run's resubmit sheet and of
its rows needing a person (`tasks.reports.attention`); the summary's ``retried_rows`` says which retry pays
it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from payops.store.database import RunDatabase
from payops.store.retries import RetryRow, RetryRows
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

__all__ = ["FailureLog", "RetryRows", "mark_retried", "retry_rows_of", "retry_store"]
from payops.tasks.reports.run_reports import resubmit_reference, resubmit_rows
from payops.tasks.rows.outcome import RowOutcome

if TYPE_CHECKING:
    from payops.tasks.intake import IntakeResult
    from payops.tasks.payouts.polling import PayoutState
    from payops.tasks.payouts.submission import BatchResult

log = logging.getLogger(__name__)


def retry_rows_of(
    columns: Sequence[str],
    table: Iterable[Mapping[str, str]],
    outcomes: Mapping[int, RowOutcome],
    reference_column: str | None,
    column_map: str,
    currency: str | None = None,
) -> list[RetryRow]:
    """The rows to pay again among ``outcomes``, as the resubmit sheet carries them, with the column mapping
    and the sheet's currency their run read them with."""
    headers, rows = resubmit_rows(columns, list(table), outcomes, reference_column)
    ref = headers.index(reference_column or "reference")
    cells = [(str(r[ref]), tuple(str(c) for c in r)) for r in rows]
    return [RetryRow(ref_, tuple(headers), row, column_map, currency=currency or "") for ref_, row in cells]


@dataclass
class FailureLog:
    """Records a run's rows to pay again as soon as they fail (the poll) or are refused (the batches)."""

    store: RetryRows | None
    label: str
    intake: IntakeResult
    column_map: str
    run_id: str | None
    logger: Any = log
    _rows: dict[str, int] = field(default_factory=dict)  # reference sent -> sheet row
    _table: dict[int, Mapping[str, str]] | None = None

    def sent(self, results: Sequence[BatchResult]) -> dict[int, RowOutcome]:
        """Learn which sheet row each payout reference is; the refused rows' outcomes."""
        refused: dict[int, RowOutcome] = {}
        for res in results:
            for item in res.items:
                self._rows[item.reference] = item.row
                if not item.accepted:
                    refused[item.row] = RowOutcome(item.row, reference=item.reference, submission="refused")
        return refused

    def follow(self, rows_by_reference: Mapping[str, int]) -> None:
        """The payouts the poll follows now, by reference (their sheet rows): a run too large to hold
        follows a part of its payouts at a time (`flows.payout_parts`)."""
        self._rows = dict(rows_by_reference)

    async def refused(self, results: Sequence[BatchResult]) -> None:
        """Record the rows the service refused (known once the batches are answered)."""
        await self.record(self.sent(results))

    async def failed(self, states: Sequence[PayoutState]) -> None:
        """Record payouts the poll saw fail (the poll's ``on_failed``)."""
        outcomes = {
            self._rows[s.reference]: RowOutcome(
                self._rows[s.reference], reference=s.reference, submission="accepted", status=s.status
            )
            for s in states
            if s.reference in self._rows
        }
        await self.record(outcomes)

    def _records(self, rows: list[int]) -> list[Mapping[str, str]]:
        """The sheet's records of ``rows`` (a spilled sheet reads just those: `SpilledTable.records_of`)."""
        records_of = getattr(self.intake.table, "records_of", None)
        if records_of is not None:
            return list(records_of(rows))
        if self._table is None:
            self._table = {int(rec["__row__"]): rec for rec in self.intake.table}
        return [self._table[row] for row in rows if row in self._table]

    async def record(self, outcomes: Mapping[int, RowOutcome]) -> None:
        if self.store is None or not outcomes:
            return
        table = self._records(sorted(outcomes))
        rows = retry_rows_of(
            self.intake.columns,
            table,
            outcomes,
            self.intake.mapped.get("reference"),
            self.column_map,
            self.intake.currency,
        )
        try:
            await asyncio.to_thread(self.store.record, self.label, rows, self.run_id)
        except SQLAlchemyError as exc:  # the payouts go on; a retry started now does not see these rows yet
            self.logger.warning(
                "%d failed row(s) not recorded for an early retry (%s); retry them once the run ends",
                len(rows),
                type(exc).__name__,
            )


def retry_store(store: RunDatabase) -> RetryRows | None:
    """The retry rows of the run's payops database; None when the run has none."""
    return RetryRows(store) if isinstance(store, Engine) else None


async def mark_retried(
    store: RetryRows | None, label: str, outcomes: Mapping[int, RowOutcome]
) -> dict[str, str]:
    """Mark the rows of run ``label`` a retry claimed (``RowOutcome.retried_as``); ``{reference sent: retry
    label}`` for the summary's ``retried_rows``. Unreadable claims: none marked, and a warning (a retry
    started later still claims only the rows nobody claimed: nothing is paid twice)."""
    if store is None:
        return {}
    try:
        claims = await asyncio.to_thread(store.claims, label)
    except SQLAlchemyError as exc:
        why = type(exc).__name__
        log.warning("retried rows of %s not read (%s): the report lists them as failed", label, why)
        return {}
    retried: dict[str, str] = {}
    for o in outcomes.values():
        if o.reference and o.needs_resubmit:
            by = claims.get(resubmit_reference(o.reference))
            if by is not None:
                o.retried_as = by
                retried[o.reference] = by
    return retried
