"""The approval policy (tiers per currency, set by an admin) and approvers' decisions on runs.

The policy is the one rule of how many approvals a payout run needs. The payout flow reads it from here for
every run, whatever started it (console, CLI, Prefect UI, API, schedule, automation); run parameters may only
raise what it asks. A new install, whose table is empty, runs under :data:`DEFAULT_POLICY`: every run needs
one approver other than whoever started it. "No approval" is a policy an admin must set on purpose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from payops.store.database import Base
from payops.store.users import UserError, utcnow
from sqlalchemy import DateTime, Engine, Integer, Numeric, String, Text, UniqueConstraint, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

MAX_APPROVERS = 5
ANY_CURRENCY = "*"
_CURRENCY = re.compile(r"^[A-Z]{3}$")


class ApprovalTier(Base):
    __tablename__ = "approval_tiers"
    __table_args__ = (UniqueConstraint("currency", "min_total"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    currency: Mapped[str] = mapped_column(String(3), default=ANY_CURRENCY)
    min_total: Mapped[Decimal] = mapped_column(Numeric(20, 2))
    approvers: Mapped[int] = mapped_column(Integer)


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


Tiers = tuple[tuple[Decimal, int], ...]


@dataclass(frozen=True)
class ApprovalPolicy:
    """Tiers ``(from_total, approvers)`` per currency (``*``: every currency not listed). A run needs, for
    each currency it pays, the approvers of the highest tier that currency's total reaches; the most of
    those. The initiator and the uploader of a run never count as its approvers (not configurable)."""

    tiers: Mapping[str, Tiers]
    default: bool = False  # True: no admin has set a policy; this is DEFAULT_POLICY

    def tiers_for(self, currency: str) -> Tiers:
        return self.tiers.get(currency) or self.tiers.get(ANY_CURRENCY) or ()

    def required(self, totals: Mapping[str, Decimal]) -> int:
        """Approvals needed for a run paying ``totals`` (amount per currency)."""
        return max(
            (n for cur, total in totals.items() for floor, n in self.tiers_for(cur) if total >= floor),
            default=0,
        )

    def to_text(self) -> str:
        """The admin's notation (:func:`parse_policy` reads it back)."""
        if self.needs_none:
            return "none"
        groups = []
        for cur in sorted(self.tiers, key=lambda c: (c == ANY_CURRENCY, c)):
            tiers = ", ".join(f"{floor}:{n}" for floor, n in self.tiers[cur])
            groups.append(tiers if cur == ANY_CURRENCY else f"{cur} {tiers}")
        return "; ".join(groups)

    @property
    def needs_none(self) -> bool:
        return all(n == 0 for tiers in self.tiers.values() for _, n in tiers)

    def describe(self) -> str:
        """One line for people: the admin page, `payops serve`'s start-up, the audit trail."""
        if self.needs_none:
            return "no approval needed (set by an admin)"
        parts = []
        for cur in sorted(self.tiers, key=lambda c: (c == ANY_CURRENCY, c)):
            name = "any other currency" if cur == ANY_CURRENCY and len(self.tiers) > 1 else cur
            if cur == ANY_CURRENCY and len(self.tiers) == 1:
                name = "every currency"
            steps = ", ".join(
                f"from {floor:,.2f}: {n} approver{'s' if n != 1 else ''}" for floor, n in self.tiers[cur]
            )
            parts.append(f"{name}: {steps}")
        suffix = " (the default: no admin has set a policy)" if self.default else ""
        return "; ".join(parts) + "; never the person who started or uploaded the run" + suffix

    def to_json(self) -> str:
        return json.dumps({cur: [[str(f), n] for f, n in tiers] for cur, tiers in self.tiers.items()})


DEFAULT_POLICY = ApprovalPolicy({ANY_CURRENCY: ((Decimal("0.00"), 1),)}, default=True)
"""A new install's policy: every payout run, whatever its size, needs one approver who did not start it."""


_THOUSANDS = re.compile(r"\d{3}(?!\d)")
"""What follows a thousands separator: three digits, then no digit (``1,000:1``, ``100,000.50:2``)."""


def _tier_parts(text: str) -> list[str]:
    """The tiers of a group: split at commas, except a comma inside an amount, written as the console writes
    amounts (``1,000:1, 100,000:2`` is two tiers): a comma before the tier's ``:`` and three digits."""
    parts: list[str] = []
    for piece in text.split(","):
        if parts and ":" not in parts[-1] and _THOUSANDS.match(piece):
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return [p.strip() for p in parts if p.strip()]


def _tiers(text: str, where: str) -> Tiers:
    tiers: dict[Decimal, int] = {}
    for part in _tier_parts(text):
        floor, _, count = part.partition(":")
        try:
            amount, n = Decimal(floor.strip().replace(",", "")), int(count.strip())
        except (InvalidOperation, ValueError):
            raise UserError(f"{where}tier {part!r}: write FROM_TOTAL:APPROVERS, e.g. 10000:2") from None
        if not amount.is_finite() or amount < 0 or not 0 <= n <= MAX_APPROVERS:
            raise UserError(f"{where}tier {part!r}: total must be >= 0 and approvers 0..{MAX_APPROVERS}")
        tiers[amount.quantize(Decimal("0.01"))] = n
    if not tiers:
        raise UserError(f"{where}no tiers: write FROM_TOTAL:APPROVERS, e.g. 0:1, 10000:2")
    return tuple(sorted(tiers.items()))


def parse_policy(text: str) -> ApprovalPolicy:
    """``"GHS 1000:1, 100000:2; USD 100:1; 0:1"`` → a policy. Groups are separated by ``;`` or new lines; a
    group starting with a currency code applies to that currency, one without to every other currency.
    ``"none"`` is the explicit "no approval needed". A clear error names the bad entry."""
    text = text.strip()
    if text.lower() in {"none", "0:0"}:
        return ApprovalPolicy({ANY_CURRENCY: ((Decimal("0.00"), 0),)})
    groups: dict[str, Tiers] = {}
    for group in filter(None, (g.strip() for g in re.split(r"[;\n]", text))):
        head, _, rest = group.partition(" ")
        named = head == ANY_CURRENCY or bool(_CURRENCY.match(head.upper()))
        currency = head.upper() if named else ANY_CURRENCY
        body = rest if named else group
        if currency in groups:
            raise UserError(f"{currency}: listed twice; give each currency one group of tiers")
        groups[currency] = _tiers(body, "" if currency == ANY_CURRENCY else f"{currency} ")
    if not groups:
        raise UserError("the policy is empty: write tiers such as '0:1, 100000:2', or 'none'")
    return ApprovalPolicy(groups)


class Approvals:
    """The policy and the decisions, on one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def policy(self) -> ApprovalPolicy:
        """The policy in force: the admin's, else :data:`DEFAULT_POLICY`."""
        with Session(self.engine) as db:
            rows = list(
                db.scalars(select(ApprovalTier).order_by(ApprovalTier.currency, ApprovalTier.min_total))
            )
        if not rows:
            return DEFAULT_POLICY
        groups: dict[str, list[tuple[Decimal, int]]] = {}
        for r in rows:
            groups.setdefault(r.currency, []).append((Decimal(r.min_total), r.approvers))
        return ApprovalPolicy({cur: tuple(tiers) for cur, tiers in groups.items()})

    def set_policy(self, policy: ApprovalPolicy) -> None:
        with Session(self.engine) as db, db.begin():
            db.execute(delete(ApprovalTier))
            db.add_all(
                ApprovalTier(currency=cur, min_total=f, approvers=n)
                for cur, tiers in policy.tiers.items()
                for f, n in tiers
            )

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
        """Record one decision; UserError when this user has decided on this run already (also when two of
        their requests race: the unique key refuses the second, never a server error)."""
        try:
            with Session(self.engine) as db, db.begin():
                existing = db.scalar(
                    select(RunDecision).where(
                        RunDecision.flow_run_id == flow_run_id, RunDecision.user == user
                    )
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
        except IntegrityError:
            raise UserError(f"{user} has already decided on this run") from None


def state_policy(engine: Engine, text: str) -> ApprovalPolicy:
    """Set the policy from its text (:func:`parse_policy`) and return it: how the demo, benchmarks and tests
    state theirs explicitly instead of inheriting the default."""
    policy = parse_policy(text)
    Approvals(engine).set_policy(policy)
    return policy
