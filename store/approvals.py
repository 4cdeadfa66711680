"""Approval rules (tiers by run total, set by an admin), the rule recorded with each run, and decisions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from sqlalchemy import DateTime, Engine, Integer, Numeric, String, Text, UniqueConstraint, delete, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from store.database import Base
from store.users import UserError, utcnow

MAX_APPROVERS = 5


class ApprovalTier(Base):
    __tablename__ = "approval_tiers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    min_total: Mapped[Decimal] = mapped_column(Numeric(20, 2), unique=True)
    approvers: Mapped[int] = mapped_column(Integer)


class PayoutRunRecord(Base):
    """Who started a console run, its total and the rule in force when it started."""

    __tablename__ = "payout_runs"

    flow_run_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    upload_id: Mapped[str] = mapped_column(String(64))
    initiator: Mapped[str] = mapped_column(String(32))
    total: Mapped[str] = mapped_column(String(32))
    required: Mapped[int] = mapped_column(Integer)
    rule: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class RunDecision(Base):
    """One approver's approval (with its signed token) or rejection (with a reason) of one run."""

    __tablename__ = "run_decisions"
    __table_args__ = (UniqueConstraint("flow_run_id", "user"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    flow_run_id: Mapped[str] = mapped_column(String(36), index=True)
    user: Mapped[str] = mapped_column(String(32))
    decision: Mapped[str] = mapped_column(String(8))
    reason: Mapped[str] = mapped_column(Text, default="")
    token: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(DateTime)


@dataclass(frozen=True)
class ApprovalRule:
    """Tiers ``(from_total, approvers)``: a run needs the approvers of the highest tier its total reaches."""

    tiers: tuple[tuple[Decimal, int], ...] = ()

    def required(self, total: Decimal) -> int:
        return max((n for floor, n in self.tiers if total >= floor), default=0)

    def to_json(self) -> str:
        return json.dumps([[str(f), n] for f, n in self.tiers])

    @classmethod
    def from_json(cls, text: str) -> ApprovalRule:
        return cls(tuple((Decimal(f), int(n)) for f, n in json.loads(text)))

    def describe(self) -> str:
        if not self.tiers:
            return "no approval needed"
        return "; ".join(f"from {f:,.2f}: {n} approver{'s' if n != 1 else ''}" for f, n in self.tiers)


def parse_tiers(text: str) -> ApprovalRule:
    """``"1000:1, 10000:2"`` → a rule; a clear error names the bad entry."""
    tiers: dict[Decimal, int] = {}
    for part in filter(None, (p.strip() for p in text.replace("\n", ",").split(","))):
        floor, _, count = part.partition(":")
        try:
            amount, n = Decimal(floor.strip()), int(count.strip())
        except (InvalidOperation, ValueError):
            raise UserError(f"tier {part!r}: write FROM_TOTAL:APPROVERS, e.g. 10000:2") from None
        if not amount.is_finite() or amount < 0 or not 0 <= n <= MAX_APPROVERS:
            raise UserError(f"tier {part!r}: total must be >= 0 and approvers 0..{MAX_APPROVERS}")
        tiers[amount.quantize(Decimal("0.01"))] = n
    return ApprovalRule(tuple(sorted(tiers.items())))


class Approvals:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def rule(self) -> ApprovalRule:
        with Session(self.engine) as db:
            rows = db.scalars(select(ApprovalTier).order_by(ApprovalTier.min_total))
            return ApprovalRule(tuple((Decimal(r.min_total), r.approvers) for r in rows))

    def set_rule(self, rule: ApprovalRule) -> None:
        with Session(self.engine) as db, db.begin():
            db.execute(delete(ApprovalTier))
            db.add_all(ApprovalTier(min_total=f, approvers=n) for f, n in rule.tiers)

    def record_run(
        self, flow_run_id: str, upload_id: str, initiator: str, total: Decimal, rule: ApprovalRule
    ) -> None:
        with Session(self.engine) as db, db.begin():
            db.add(
                PayoutRunRecord(
                    flow_run_id=flow_run_id,
                    upload_id=upload_id,
                    initiator=initiator,
                    total=str(total),
                    required=rule.required(total),
                    rule=rule.to_json(),
                    created_at=utcnow(),
                )
            )

    def run(self, flow_run_id: str) -> PayoutRunRecord | None:
        with Session(self.engine) as db:
            record = db.get(PayoutRunRecord, flow_run_id)
            if record is not None:
                db.expunge(record)
            return record

    def decisions(self, flow_run_id: str) -> list[RunDecision]:
        with Session(self.engine) as db:
            rows = list(
                db.scalars(
                    select(RunDecision).where(RunDecision.flow_run_id == flow_run_id).order_by(RunDecision.id)
                )
            )
            db.expunge_all()
            return rows

    def decide(self, flow_run_id: str, user: str, decision: str, reason: str = "", token: str = "") -> None:
        with Session(self.engine) as db, db.begin():
            existing = db.scalar(
                select(RunDecision).where(RunDecision.flow_run_id == flow_run_id, RunDecision.user == user)
            )
            if existing is not None:
                raise UserError(f"{user} has already decided on this run ({existing.decision})")
            db.add(
                RunDecision(
                    flow_run_id=flow_run_id,
                    user=user,
                    decision=decision,
                    reason=reason,
                    token=token,
                    at=utcnow(),
                )
            )
