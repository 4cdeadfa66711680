"""Reconciliation records: what each payout run was approved to pay, every check of a run or a day with its
differences, and the wallet snapshots and open items of each daily close.

The Payments Service stays the source of truth for money: these tables hold payops' own side of the match
(what it meant to pay, and what it found when it looked), never a payment's state. The API has no historical
balance, so a close snapshots ``balances`` and ``reserved``; the next close checks the change against the
movements in between. Amounts are decimal strings (exact on SQLite and PostgreSQL alike).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from payops.store.database import Base
from sqlalchemy import (
    DateTime,
    Engine,
    ForeignKey,
    Integer,
    String,
    Text,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

IN_CHUNK = 500
"""References per ``IN (...)`` query (well under SQLite's parameter limit)."""


class ReconRun(Base):
    """A payout run reconciliation knows: when it started sending and ended, its latest status."""

    __tablename__ = "recon_runs"

    label: Mapped[str] = mapped_column(String(200), primary_key=True)
    sent_from: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    rows: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))  # pending, clean, differences
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sheet: Mapped[str | None] = mapped_column(String(64), index=True)  # the sheet's fingerprint
    name: Mapped[str | None] = mapped_column(String(200))  # the name the run is shown by


class ReconRunRow(Base):
    """One approved payout of a run: the amount sent, the pre-flight's fee bound for it, and the digest of
    its payee number, amount and currency (`tasks.payouts.paid_before.row_digest`)."""

    __tablename__ = "recon_run_rows"

    label: Mapped[str] = mapped_column(String(200), primary_key=True)
    reference: Mapped[str] = mapped_column(String(64), primary_key=True)
    row: Mapped[int] = mapped_column(Integer)
    amount: Mapped[str] = mapped_column(String(32))
    currency: Mapped[str] = mapped_column(String(3))
    fee_low: Mapped[str | None] = mapped_column(String(32))
    fee_high: Mapped[str | None] = mapped_column(String(32))
    digest: Mapped[str | None] = mapped_column(String(32), index=True)


class ReconCheck(Base):
    """One reconciliation of a run (scope ``run``, key = label) or a day (scope ``day``, key = YYYY-MM-DD)."""

    __tablename__ = "recon_checks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(8))
    key: Mapped[str] = mapped_column(String(200), index=True)
    checked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    trigger: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))  # clean, differences, open (items still moving)
    summary: Mapped[str] = mapped_column(Text)


class ReconDifference(Base):
    """One difference found by a check."""

    __tablename__ = "recon_differences"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    check_id: Mapped[int] = mapped_column(ForeignKey("recon_checks.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(40))
    reference: Mapped[str | None] = mapped_column(String(64), index=True)
    label: Mapped[str | None] = mapped_column(String(200))
    currency: Mapped[str | None] = mapped_column(String(3))
    expected: Mapped[str | None] = mapped_column(String(64))
    actual: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[str] = mapped_column(Text)


class WalletSnapshot(Base):
    """A currency's wallet balance and reserved amount at a daily close."""

    __tablename__ = "recon_wallet_snapshots"

    check_id: Mapped[int] = mapped_column(ForeignKey("recon_checks.id", ondelete="CASCADE"), primary_key=True)
    currency: Mapped[str] = mapped_column(String(3), primary_key=True)
    taken_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    balance: Mapped[str] = mapped_column(String(32))
    reserved: Mapped[str] = mapped_column(String(32))


class OpenItem(Base):
    """A transaction still moving (or unchecked by the platform) at a close: re-read by the next one.

    ``booked`` is the wallet effect the close counted for it so far."""

    __tablename__ = "recon_open_items"

    check_id: Mapped[int] = mapped_column(ForeignKey("recon_checks.id", ondelete="CASCADE"), primary_key=True)
    transaction_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    reference: Mapped[str] = mapped_column(String(64))
    currency: Mapped[str] = mapped_column(String(3))
    status: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    booked: Mapped[str] = mapped_column(String(32))


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # SQLite returns naive datetimes


@dataclass(frozen=True, slots=True)
class Difference:
    """A difference as a check found it (``expected``/``actual`` are amounts or statuses as text)."""

    kind: str
    reference: str | None = None
    label: str | None = None
    currency: str | None = None
    expected: str | None = None
    actual: str | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, str | None]:
        """For JSON (summaries, `payops reconcile history --json`)."""
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True)
class Check:
    """A stored check with its differences (snapshots and open items for a day)."""

    id: int
    scope: str
    key: str
    checked_at: datetime
    trigger: str
    status: str
    summary: dict[str, Any]
    differences: list[Difference] = field(default_factory=list)
    snapshots: dict[str, tuple[str, str]] = field(default_factory=dict)  # currency -> (balance, reserved)
    taken_at: datetime | None = None

    def as_json(self) -> dict[str, Any]:
        """The check as `payops reconcile history --json` and the server's API give it."""
        return {
            "id": self.id,
            "scope": self.scope,
            "key": self.key,
            "checked_at": self.checked_at.isoformat(),
            "trigger": self.trigger,
            "status": self.status,
            "summary": self.summary,
            "differences": [d.as_dict() for d in self.differences],
            "snapshot": {cur: {"balance": b, "reserved": r} for cur, (b, r) in self.snapshots.items()},
        }


@dataclass(frozen=True, slots=True)
class IntendedPayout:
    """A row of ``recon_run_rows``."""

    reference: str
    row: int
    amount: str
    currency: str
    fee_low: str | None
    fee_high: str | None
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class SentRun:
    """A run that sent payouts: its label, the name it is shown by, when it started sending, its rows, its
    sheet's fingerprint."""

    label: str
    name: str | None
    sent_from: datetime
    rows: int
    sheet: str | None


def _chunks(items: Iterable[str], n: int = IN_CHUNK) -> Iterator[list[str]]:
    """``items`` in lists of at most ``n``, consumed as they go (an iterable of any length)."""
    it = iter(items)
    while part := list(islice(it, n)):
        yield part


_INTENDED = select(
    ReconRunRow.reference,
    ReconRunRow.row,
    ReconRunRow.amount,
    ReconRunRow.currency,
    ReconRunRow.fee_low,
    ReconRunRow.fee_high,
)


class ReconciliationStore:
    """Reads and writes the reconciliation tables (the caller migrates the database and owns the engine)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- runs ----------------------------------------------------------------------------------------
    def record_intent(
        self,
        label: str,
        sent_from: datetime,
        payouts: Sequence[IntendedPayout],
        *,
        first: bool = True,
        sheet: str | None = None,
        name: str | None = None,
    ) -> None:
        """What run ``label`` was approved to pay. ``first`` (the default) replaces an earlier attempt's
        record of the same label; ``first=False`` adds a later part of the same run to the record the first
        part started (its ``sent_from``, ``sheet`` and ``name`` stay; LookupError when no record was
        started). A reference recorded twice in one run is refused (IntegrityError), never counted twice.
        ``sheet`` is the fingerprint of the run's sheet, ``name`` the name the run is shown by."""
        with self.engine.begin() as db:
            if first:
                db.execute(delete(ReconRunRow).where(ReconRunRow.label == label))
                db.execute(delete(ReconRun).where(ReconRun.label == label))
                db.execute(
                    insert(ReconRun).values(
                        label=label,
                        sent_from=sent_from,
                        ended_at=None,
                        rows=len(payouts),
                        status="pending",
                        sheet=sheet,
                        name=name[:200] if name else None,
                    )
                )
            else:
                grown = db.execute(
                    update(ReconRun).where(ReconRun.label == label).values(rows=ReconRun.rows + len(payouts))
                )
                if grown.rowcount != 1:
                    raise LookupError(f"run {label!r}: a later part recorded before the first")
            if payouts:
                db.execute(
                    insert(ReconRunRow),
                    [
                        {
                            "label": label,
                            "reference": p.reference,
                            "row": p.row,
                            "amount": p.amount,
                            "currency": p.currency,
                            "fee_low": p.fee_low,
                            "fee_high": p.fee_high,
                            "digest": p.digest,
                        }
                        for p in payouts
                    ],
                )

    def forget(self, label: str, references: Iterable[str]) -> None:
        """Drop payouts the service refused from what run ``label`` pays (they never left). ``references``
        is read as it goes, `IN_CHUNK` at a time (it need not be a collection)."""
        with self.engine.begin() as db:
            for part in _chunks(references):
                db.execute(
                    delete(ReconRunRow).where(ReconRunRow.label == label, ReconRunRow.reference.in_(part))
                )
            left = db.scalar(select(func.count()).select_from(ReconRunRow).where(ReconRunRow.label == label))
            db.execute(update(ReconRun).where(ReconRun.label == label).values(rows=left or 0))

    def mark_ended(self, label: str, at: datetime) -> None:
        with self.engine.begin() as db:
            db.execute(update(ReconRun).where(ReconRun.label == label).values(ended_at=at))

    def run(self, label: str) -> ReconRun | None:
        with Session(self.engine) as db:
            found = db.get(ReconRun, label)
            if found is not None:
                db.expunge(found)
                found.sent_from = _aware(found.sent_from)  # type: ignore[assignment]
                found.ended_at = _aware(found.ended_at)
                found.checked_at = _aware(found.checked_at)
            return found

    def intended(self, label: str) -> list[IntendedPayout]:
        """Every approved payout of run ``label`` (in no set order); `intended_chunks` for a large run."""
        with self.engine.connect() as db:
            return [IntendedPayout(*r) for r in db.execute(_INTENDED.where(ReconRunRow.label == label))]

    def intended_chunks(self, label: str, size: int = 5_000) -> Iterator[list[IntendedPayout]]:
        """Run ``label``'s approved payouts in lists of at most ``size``, ordered by reference in the
        database's own collation (each list one keyset query: no cursor is held between lists)."""
        after: str | None = None
        while True:
            q = _INTENDED.where(ReconRunRow.label == label)
            if after is not None:
                q = q.where(ReconRunRow.reference > after)
            with self.engine.connect() as db:
                part = [IntendedPayout(*r) for r in db.execute(q.order_by(ReconRunRow.reference).limit(size))]
            if part:
                yield part
            if len(part) < size:
                return
            after = part[-1].reference

    def labels_of(self, references: Iterable[str]) -> dict[str, str]:
        """The run label of each reference some run was approved to pay."""
        refs = sorted(set(references))
        found: dict[str, str] = {}
        with self.engine.connect() as db:
            for part in _chunks(refs):
                q = select(ReconRunRow.reference, ReconRunRow.label).where(ReconRunRow.reference.in_(part))
                found.update({ref: label for ref, label in db.execute(q)})
        return found

    def paid_digests(self, digests: Iterable[str], since: datetime) -> Iterator[tuple[str, str, str]]:
        """(digest, label, reference) of every payout a run that started sending at or after ``since`` was
        approved to pay with one of ``digests``. Read `IN_CHUNK` digests at a time, on the digest's index:
        ``digests`` may be an iterable of any length."""
        for part in _chunks(digests):
            q = (
                select(ReconRunRow.digest, ReconRunRow.label, ReconRunRow.reference)
                .join(ReconRun, ReconRun.label == ReconRunRow.label)
                .where(ReconRunRow.digest.in_(part), ReconRun.sent_from >= since)
            )
            with self.engine.connect() as db:
                yield from ((str(d), str(label), str(ref)) for d, label, ref in db.execute(q))

    def sent_runs(
        self, labels: Iterable[str] = (), *, sheet: str | None = None, since: datetime
    ) -> list[SentRun]:
        """The runs named ``labels``, and the runs of the sheet whose fingerprint is ``sheet``, that started
        sending at or after ``since``; oldest first."""
        found: dict[str, SentRun] = {}
        columns = select(ReconRun.label, ReconRun.name, ReconRun.sent_from, ReconRun.rows, ReconRun.sheet)
        queries = [columns.where(ReconRun.label.in_(part)) for part in _chunks(sorted(set(labels)))]
        if sheet:
            queries.append(columns.where(ReconRun.sheet == sheet))
        with self.engine.connect() as db:
            for q in queries:
                for label, name, sent_from, rows, sheet_ in db.execute(q.where(ReconRun.sent_from >= since)):
                    found[label] = SentRun(label, name, _aware(sent_from), rows, sheet_)  # type: ignore[arg-type]
        return sorted(found.values(), key=lambda r: (r.sent_from, r.label))

    def run_labels(self) -> list[str]:
        with self.engine.connect() as db:
            return list(db.scalars(select(ReconRun.label).order_by(ReconRun.label)))

    # -- checks --------------------------------------------------------------------------------------
    def save_check(
        self,
        scope: str,
        key: str,
        trigger: str,
        status: str,
        summary: dict[str, Any],
        differences: Sequence[Difference],
        *,
        checked_at: datetime,
        snapshots: dict[str, tuple[str, str]] | None = None,
        open_items: Sequence[dict[str, Any]] = (),
    ) -> int:
        """Store one check with its differences (and a close's snapshots and open items); returns its id."""
        with self.engine.begin() as db:
            check_id = db.execute(
                insert(ReconCheck).values(
                    scope=scope,
                    key=key,
                    checked_at=checked_at,
                    trigger=trigger,
                    status=status,
                    summary=json.dumps(summary, default=str),
                )
            ).inserted_primary_key[0]
            if differences:
                db.execute(
                    insert(ReconDifference),
                    [{"check_id": check_id, **_difference_row(d)} for d in differences],
                )
            if snapshots:
                db.execute(
                    insert(WalletSnapshot),
                    [
                        dict(check_id=check_id, currency=c, taken_at=checked_at, balance=b, reserved=r)
                        for c, (b, r) in snapshots.items()
                    ],
                )
            if open_items:
                db.execute(insert(OpenItem), [{"check_id": check_id, **item} for item in open_items])
            if scope == "run":
                db.execute(
                    update(ReconRun).where(ReconRun.label == key).values(status=status, checked_at=checked_at)
                )
        return int(check_id)

    def checks(self, scope: str | None = None, key: str | None = None, limit: int = 50) -> list[Check]:
        """Newest first, with their differences."""
        q = select(ReconCheck).order_by(ReconCheck.checked_at.desc(), ReconCheck.id.desc()).limit(limit)
        if scope:
            q = q.where(ReconCheck.scope == scope)
        if key:
            q = q.where(ReconCheck.key == key)
        with Session(self.engine) as db:
            found = list(db.scalars(q))
            ids = [c.id for c in found]
            diffs: dict[int, list[Difference]] = {i: [] for i in ids}
            snaps: dict[int, dict[str, tuple[str, str]]] = {i: {} for i in ids}
            taken: dict[int, datetime] = {}
            if ids:
                for d in db.scalars(
                    select(ReconDifference)
                    .where(ReconDifference.check_id.in_(ids))
                    .order_by(ReconDifference.id)
                ):
                    diffs[d.check_id].append(
                        Difference(d.kind, d.reference, d.label, d.currency, d.expected, d.actual, d.detail)
                    )
                for s in db.scalars(select(WalletSnapshot).where(WalletSnapshot.check_id.in_(ids))):
                    snaps[s.check_id][s.currency] = (s.balance, s.reserved)
                    taken[s.check_id] = _aware(s.taken_at)  # type: ignore[assignment]
            return [
                Check(
                    c.id,
                    c.scope,
                    c.key,
                    _aware(c.checked_at),  # type: ignore[arg-type]
                    c.trigger,
                    c.status,
                    json.loads(c.summary),
                    diffs[c.id],
                    snaps[c.id],
                    taken.get(c.id),
                )
                for c in found
            ]

    def last_close(self) -> Check | None:
        """The newest daily close that took a wallet snapshot."""
        with self.engine.connect() as db:
            check_id = db.scalar(
                select(ReconCheck.id)
                .join(WalletSnapshot, WalletSnapshot.check_id == ReconCheck.id)
                .where(ReconCheck.scope == "day")
                .order_by(ReconCheck.checked_at.desc(), ReconCheck.id.desc())
                .limit(1)
            )
        if check_id is None:
            return None
        return next(c for c in self.checks("day", limit=1_000) if c.id == check_id)

    def open_items(self, check_id: int) -> list[dict[str, Any]]:
        with self.engine.connect() as db:
            rows = db.execute(select(OpenItem).where(OpenItem.check_id == check_id)).mappings()
            return [
                {k: (_aware(v) if k == "created_at" else v) for k, v in dict(r).items() if k != "check_id"}
                for r in rows
            ]


def _difference_row(d: Difference) -> dict[str, Any]:
    return {
        "kind": d.kind,
        "reference": d.reference,
        "label": d.label,
        "currency": d.currency,
        "expected": d.expected,
        "actual": d.actual,
        "detail": d.detail[:2000],
    }
