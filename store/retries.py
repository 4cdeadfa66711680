"""The rows of a payout run to pay again, and the retry that pays each: what makes a failed row paid again at
most once, whatever order the run, its retries and their re-runs happen in.

A run records each row as soon as it fails or is refused (the cells of its resubmit row, with the fresh
reference a retry sends: `tasks.reports.run_reports.resubmit_rows`), so a retry can start while the run still
polls the others. A retry **claims** rows for its label in one transaction, all or none: a row belongs to at
most one retry, and a retry label to exactly one set of rows. So two retries never pay the same row, and a
re-run of a retry (same label) rebuilds the same sheet and replays instead of paying again. The run reads the
claims when it reports, and leaves the claimed rows out of its resubmit sheet and its rows needing a person.

Payments state is not kept here: whether a retry's payout was delivered is the service's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from payops.store.database import Base, upsert_insert
from payops.store.users import utcnow
from sqlalchemy import JSON, DateTime, Engine, Integer, String, Text, UniqueConstraint, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

IN_CHUNK = 500
"""References per ``IN (...)`` query (well under SQLite's parameter limit)."""


class RetryRowRecord(Base):
    __tablename__ = "retry_rows"
    __table_args__ = (UniqueConstraint("parent_label", "reference", name="uq_retry_rows_parent_reference"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    parent_label: Mapped[str] = mapped_column(String(200), index=True)
    parent_run_id: Mapped[str | None] = mapped_column(String(36), index=True, nullable=True)
    reference: Mapped[str] = mapped_column(String(64))
    headers: Mapped[list[str]] = mapped_column(JSON)
    cells: Mapped[list[str]] = mapped_column(JSON)
    column_map: Mapped[str] = mapped_column(Text, default="")
    currency: Mapped[str] = mapped_column(String(3), default="", server_default="")
    recorded_at: Mapped[datetime] = mapped_column(DateTime)
    retry_label: Mapped[str | None] = mapped_column(String(200), index=True, nullable=True)
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


@dataclass(frozen=True)
class RetryRow:
    """One row to pay again: its resubmit row (``headers``, ``cells``; ``reference`` is the fresh one it is
    sent with), the run's explicit column mapping, the retry that claimed it (None: not retried yet), and the
    sheet's currency its run read it with ("" when every row had its own currency cell)."""

    reference: str
    headers: tuple[str, ...]
    cells: tuple[str, ...]
    column_map: str = ""
    retry_label: str | None = None
    currency: str = ""


class RetryConflict(ValueError):
    """A claim that cannot be granted; nothing was claimed (the message says why)."""


class RetryRows:
    """The ``retry_rows`` table."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, parent_label: str, rows: Iterable[RetryRow], run_id: str | None = None) -> int:
        """Record rows of run ``parent_label`` to pay again; a row recorded before keeps its cells and its
        claim (a re-run of the run records the same rows again). Returns how many were new."""
        now = utcnow()
        values = [
            {
                "parent_label": parent_label,
                "parent_run_id": run_id,
                "reference": r.reference,
                "headers": list(r.headers),
                "cells": list(r.cells),
                "column_map": r.column_map,
                "currency": r.currency,
                "recorded_at": now,
            }
            for r in rows
        ]
        added = 0
        with self.engine.begin() as db:
            for start in range(0, len(values), IN_CHUNK):
                stmt = upsert_insert(self.engine, RetryRowRecord).values(values[start : start + IN_CHUNK])
                added += db.execute(
                    stmt.on_conflict_do_nothing(index_elements=["parent_label", "reference"])
                ).rowcount
            if run_id is not None:  # a re-run of the run: its rows are found by its new run id too
                db.execute(
                    update(RetryRowRecord)
                    .where(RetryRowRecord.parent_label == parent_label)
                    .values(parent_run_id=run_id)
                )
        return added

    def unclaimed(self, parent_label: str) -> list[RetryRow]:
        """The rows of run ``parent_label`` no retry has claimed yet, in the order they were recorded."""
        query = select(RetryRowRecord).where(
            RetryRowRecord.parent_label == parent_label, RetryRowRecord.retry_label.is_(None)
        )
        return self._read(query)

    def claimed_by(self, retry_label: str) -> list[RetryRow]:
        """The rows retry ``retry_label`` claimed (its sheet), in the order they were recorded."""
        return self._read(select(RetryRowRecord).where(RetryRowRecord.retry_label == retry_label))

    def ancestors(self, label: str, depth: int = 20) -> list[str]:
        """The runs whose failed rows run ``label`` pays again: the run it retries, the run that one
        retries, and so on (none: not a retry)."""
        found: list[str] = []
        current = {label}
        with Session(self.engine) as db:
            for _ in range(depth):
                query = (
                    select(RetryRowRecord.parent_label)
                    .where(RetryRowRecord.retry_label.in_(sorted(current)))
                    .distinct()
                )
                current = {str(p) for p in db.scalars(query)} - {label, *found}
                if not current:
                    break
                found += sorted(current)
        return found

    def claims(self, parent_label: str) -> dict[str, str]:
        """``{fresh reference: retry label}`` of the rows of run ``parent_label`` a retry claimed."""
        query = select(RetryRowRecord.reference, RetryRowRecord.retry_label).where(
            RetryRowRecord.parent_label == parent_label, RetryRowRecord.retry_label.is_not(None)
        )
        with Session(self.engine) as db:
            return {ref: str(label) for ref, label in db.execute(query)}

    def retries(self, parent_label: str) -> dict[str, int]:
        """``{retry label: rows}`` of run ``parent_label``, in the order the retries claimed."""
        query = (
            select(RetryRowRecord.retry_label, RetryRowRecord.claimed_at, RetryRowRecord.id)
            .where(RetryRowRecord.parent_label == parent_label, RetryRowRecord.retry_label.is_not(None))
            .order_by(RetryRowRecord.claimed_at, RetryRowRecord.id)
        )
        counts: dict[str, int] = {}
        with Session(self.engine) as db:
            for label, _, _ in db.execute(query):
                counts[str(label)] = counts.get(str(label), 0) + 1
        return counts

    def labels_starting(self, prefix: str) -> set[str]:
        """Every retry label that starts with ``prefix`` (to pick the next free one)."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = (
            select(RetryRowRecord.retry_label)
            .where(RetryRowRecord.retry_label.like(f"{escaped}%", escape="\\"))
            .distinct()
        )
        with Session(self.engine) as db:
            return {str(label) for label in db.scalars(query)}

    def label_of_run(self, run_id: str) -> str | None:
        """The label of the run (Prefect flow run id) that recorded rows, or None when it recorded none."""
        query = select(RetryRowRecord.parent_label).where(RetryRowRecord.parent_run_id == run_id).limit(1)
        with Session(self.engine) as db:
            return db.scalar(query)

    def claim(self, parent_label: str, retry_label: str, references: Sequence[str]) -> None:
        """Claim exactly ``references`` (fresh references of recorded rows of ``parent_label``) for retry
        ``retry_label``, all or none. Claiming again what a label holds already is granted (a re-run of the
        retry); a row another retry holds, a row never recorded, or a label that holds other rows is a
        :class:`RetryConflict`, and nothing is claimed.

        The UPDATE comes first: it takes the write lock (SQLite) or the row locks (PostgreSQL) before
        anything is read, so two claims at once are serialised and the second sees the first's."""
        wanted = set(references)
        if not wanted:
            raise RetryConflict("a retry claims at least one row")
        now = utcnow()
        refs = sorted(wanted)
        with self.engine.begin() as db:
            holders: dict[str, str | None] = {}
            new: set[str] = set()
            for start in range(0, len(refs), IN_CHUNK):
                chunk = refs[start : start + IN_CHUNK]
                new.update(
                    db.scalars(
                        update(RetryRowRecord)
                        .where(
                            RetryRowRecord.parent_label == parent_label,
                            RetryRowRecord.reference.in_(chunk),
                            RetryRowRecord.retry_label.is_(None),
                        )
                        .values(retry_label=retry_label, claimed_at=now)
                        .returning(RetryRowRecord.reference)
                    )
                )
                found = select(RetryRowRecord.reference, RetryRowRecord.retry_label).where(
                    RetryRowRecord.parent_label == parent_label, RetryRowRecord.reference.in_(chunk)
                )
                holders.update({ref: label for ref, label in db.execute(found)})
            held = set(
                db.scalars(select(RetryRowRecord.reference).where(RetryRowRecord.retry_label == retry_label))
            )
            missing = wanted - holders.keys()
            taken = {ref: label for ref, label in holders.items() if label != retry_label}
            if missing:
                raise RetryConflict(
                    f"not recorded as failed in run {parent_label}: {len(missing)} of the rows asked for "
                    f"(e.g. {min(missing)}); nothing was claimed"
                )
            if taken:
                by = ", ".join(sorted({str(label) for label in taken.values()}))
                raise RetryConflict(
                    f"retried already by {by}: {len(taken)} of the rows of run {parent_label} asked for "
                    f"(e.g. {min(taken)}); nothing was claimed"
                )
            before = held - new
            if before and before != wanted:  # a label that held rows before may only claim those again
                raise RetryConflict(
                    f"the label {retry_label} is taken by a retry of other rows; nothing was claimed"
                )

    def _read(self, query: object) -> list[RetryRow]:
        with Session(self.engine) as db:
            return [
                RetryRow(
                    r.reference, tuple(r.headers), tuple(r.cells), r.column_map, r.retry_label, r.currency
                )
                for r in db.scalars(query.order_by(RetryRowRecord.id))  # type: ignore[attr-defined]
            ]
