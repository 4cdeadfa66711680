"""What a payout run waiting for approval shows its approvers, kept by the flow before it pauses.

The flow writes the request (who started the run and how, the approvals needed, totals per currency with
fees, balance and limit headroom, the name-check findings, the deadline) and every row as the approver will
see it. The console pages and ``payops approve`` read it from here; the approvers' signatures cover the
fingerprint of exactly these rows (tasks/approval/approvals.py), so what was shown is what was signed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any

from payops.store.database import Base
from payops.store.users import utcnow
from sqlalchemy import Boolean, DateTime, Engine, Integer, String, Text, func, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

ROW_FIELDS = (
    "row",
    "reference",
    "amount",
    "currency",
    "provider",
    "destination_type",
    "destination",
    "payee",
    "note",
)
"""The fields of a row an approver sees, in the order the fingerprint hashes them (all text)."""

STATES = ("waiting", "approved", "rejected", "expired", "not_approved")
_INSERT_CHUNK = 2000


class ApprovalRequest(Base):
    __tablename__ = "approval_requests"

    flow_run_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    label: Mapped[str] = mapped_column(String(64), index=True)
    channel: Mapped[str] = mapped_column(String(16))
    initiator: Mapped[str | None] = mapped_column(String(32), nullable=True)
    uploader: Mapped[str | None] = mapped_column(String(32), nullable=True)
    required: Mapped[int] = mapped_column(Integer)
    excluded: Mapped[str] = mapped_column(Text, default="")
    policy: Mapped[str] = mapped_column(Text, default="")
    fingerprint: Mapped[str] = mapped_column(String(64))
    totals: Mapped[str] = mapped_column(Text)  # JSON, see RequestView.totals
    rows: Mapped[int] = mapped_column(Integer)
    findings: Mapped[str] = mapped_column(Text, default="{}")  # JSON {kind: [row, ...]}
    paid_before: Mapped[str] = mapped_column(Text, default="[]")  # JSON [earlier run, ...]
    created_at: Mapped[datetime] = mapped_column(DateTime)
    deadline: Mapped[datetime] = mapped_column(DateTime)
    state: Mapped[str] = mapped_column(String(16), default="waiting", index=True)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    reminded_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class ApprovalRow(Base):
    __tablename__ = "approval_rows"

    flow_run_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    row: Mapped[int] = mapped_column(Integer, primary_key=True)
    reference: Mapped[str] = mapped_column(Text)
    amount: Mapped[str] = mapped_column(String(32))
    currency: Mapped[str] = mapped_column(String(3))
    provider: Mapped[str] = mapped_column(Text)
    destination_type: Mapped[str] = mapped_column(String(16))
    destination: Mapped[str] = mapped_column(Text)
    payee: Mapped[str] = mapped_column(Text, default="")
    note: Mapped[str] = mapped_column(Text, default="")
    verdict: Mapped[str] = mapped_column(String(16), default="")  # match, partial, mismatch, unverified, ""
    holder: Mapped[str] = mapped_column(Text, default="")
    look: Mapped[bool] = mapped_column(Boolean, default=False, index=True)


@dataclass(frozen=True)
class RequestView:
    """An approval request as the pages read it (JSON fields decoded)."""

    flow_run_id: str
    label: str
    channel: str
    initiator: str | None
    uploader: str | None
    required: int
    excluded: tuple[str, ...]
    policy: str
    fingerprint: str
    totals: dict[str, dict[str, Any]]  # currency -> payouts, amount, fees, with_fees, available, after, ...
    rows: int
    findings: dict[str, list[int]]  # mismatch, partial, unverified, paid_before -> rows; no_name_column -> []
    created_at: datetime
    deadline: datetime
    state: str
    decided_at: datetime | None
    paid_before: list[dict[str, Any]] = field(default_factory=list)  # tasks.payouts.paid_before.EarlierRun
    reminded_at: datetime | None = None

    @property
    def seconds_left(self) -> int:
        return max(int((self.deadline - utcnow()).total_seconds()), 0)


def _view(r: ApprovalRequest) -> RequestView:
    return RequestView(
        r.flow_run_id,
        r.label,
        r.channel,
        r.initiator,
        r.uploader,
        r.required,
        tuple(x for x in r.excluded.split(",") if x),
        r.policy,
        r.fingerprint,
        json.loads(r.totals),
        r.rows,
        json.loads(r.findings or "{}"),
        r.created_at,
        r.deadline,
        r.state,
        r.decided_at,
        json.loads(r.paid_before or "[]"),
        r.reminded_at,
    )


class ApprovalRequests:
    """Approval requests and their rows, on one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def open(
        self,
        *,
        flow_run_id: str,
        label: str,
        channel: str,
        initiator: str | None,
        uploader: str | None,
        required: int,
        excluded: Iterable[str],
        policy: str,
        fingerprint: str,
        totals: dict[str, dict[str, Any]],
        findings: dict[str, list[int]],
        deadline: datetime,
        rows: Iterable[dict[str, Any]],
        paid_before: list[dict[str, Any]] | None = None,
    ) -> None:
        """Record a run's request and its rows (each a dict of ROW_FIELDS plus verdict, holder, look), and
        the runs that paid its rows before (``paid_before``). A run that pauses again (a retry of the flow
        run) replaces its earlier request."""
        with Session(self.engine) as db, db.begin():
            db.query(ApprovalRow).filter(ApprovalRow.flow_run_id == flow_run_id).delete()
            db.query(ApprovalRequest).filter(ApprovalRequest.flow_run_id == flow_run_id).delete()
            count = 0
            it = iter(rows)
            while chunk := list(islice(it, _INSERT_CHUNK)):
                db.execute(ApprovalRow.__table__.insert(), [{"flow_run_id": flow_run_id, **r} for r in chunk])
                count += len(chunk)
            db.add(
                ApprovalRequest(
                    flow_run_id=flow_run_id,
                    label=label,
                    channel=channel,
                    initiator=initiator,
                    uploader=uploader,
                    required=required,
                    excluded=",".join(sorted(set(excluded))),
                    policy=policy,
                    fingerprint=fingerprint,
                    totals=json.dumps(totals),
                    rows=count,
                    findings=json.dumps(findings),
                    paid_before=json.dumps(paid_before or [], default=str),
                    created_at=utcnow(),
                    deadline=deadline,
                    state="waiting",
                )
            )

    def get(self, flow_run_id: str) -> RequestView | None:
        with Session(self.engine) as db:
            r = db.get(ApprovalRequest, flow_run_id)
            return _view(r) if r is not None else None

    def rows(
        self, flow_run_id: str, *, look_only: bool = False, offset: int = 0, limit: int = 50
    ) -> list[ApprovalRow]:
        query = select(ApprovalRow).where(ApprovalRow.flow_run_id == flow_run_id)
        if look_only:
            query = query.where(ApprovalRow.look.is_(True))
        with Session(self.engine) as db:
            out = list(db.scalars(query.order_by(ApprovalRow.row).offset(offset).limit(limit)))
            db.expunge_all()
            return out

    def count_rows(self, flow_run_id: str, *, look_only: bool = False) -> int:
        query = select(func.count()).select_from(ApprovalRow).where(ApprovalRow.flow_run_id == flow_run_id)
        if look_only:
            query = query.where(ApprovalRow.look.is_(True))
        with Session(self.engine) as db:
            return int(db.scalar(query) or 0)

    def row_tuples(self, flow_run_id: str) -> Iterator[tuple[str, ...]]:
        """Every row's ROW_FIELDS as text, in row order: what the fingerprint covers."""
        columns = [getattr(ApprovalRow, f) for f in ROW_FIELDS]
        query = select(*columns).where(ApprovalRow.flow_run_id == flow_run_id).order_by(ApprovalRow.row)
        with Session(self.engine) as db:
            for values in db.execute(query).yield_per(5000):
                yield tuple(str(v) for v in values)

    def close(self, flow_run_id: str, state: str) -> None:
        """The request is decided (approved, rejected, expired, not_approved)."""
        if state not in STATES:
            raise ValueError(f"state {state!r} is not one of {', '.join(STATES)}")
        with Session(self.engine) as db, db.begin():
            db.execute(
                update(ApprovalRequest)
                .where(ApprovalRequest.flow_run_id == flow_run_id)
                .values(state=state, decided_at=utcnow())
            )

    def mark_reminded(self, flow_run_id: str) -> None:
        with Session(self.engine) as db, db.begin():
            db.execute(
                update(ApprovalRequest)
                .where(ApprovalRequest.flow_run_id == flow_run_id)
                .values(reminded_at=utcnow())
            )

    def waiting(self) -> list[RequestView]:
        """Requests still waiting, oldest deadline first."""
        query = (
            select(ApprovalRequest)
            .where(ApprovalRequest.state == "waiting")
            .order_by(ApprovalRequest.deadline)
        )
        with Session(self.engine) as db:
            return [_view(r) for r in db.scalars(query)]
