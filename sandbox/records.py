"""In-memory records of the emulator: businesses, credentials, movements, settlement runs, events.

Records render themselves to the wire (camelCase dicts) with ``to_wire()``; money stays Decimal inside.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from .clock import iso
from .money import fmt

ALL_PERMISSIONS = frozenset(
    {
        "collections.read",
        "collections.write",
        "disbursements.read",
        "disbursements.write",
        "settlements.read",
        "settlements.write",
        "transactions.read",
        "wallettransfer.read",
        "wallettransfer.write",
    }
)
ENVIRONMENTS = ("test", "live")
BUSINESS_STATUSES = ("active", "suspended", "deactivated")


_ids = random.SystemRandom().getrandbits(64)
_rng = random.Random(_ids)


def new_id(prefix: str = "") -> str:
    """A random id: a UUID string without ``prefix``, else ``prefix`` + 32 hex digits (``txn_…``)."""
    if not prefix:
        return str(uuid.uuid4())
    return f"{prefix}{_rng.getrandbits(128):032x}"


@dataclass
class Business:
    """A business: one wallet, limits and data set per environment."""

    id: str
    handle: str
    name: str
    status: str = "active"


@dataclass(frozen=True)
class Credential:
    """A client credential; belongs to one business and one environment."""

    client_id: str
    client_secret: str
    business_id: str
    environment: str
    permissions: frozenset[str] = ALL_PERMISSIONS


@dataclass
class Movement:
    """A collection, payout or settlement payment: the spec's shared movement record plus list fields.

    Collections reuse it (``kind="collection"``, ``direction="in"``, ``settlement_status``).
    """

    kind: str
    direction: str
    reference: str
    amount: Decimal
    currency: str
    status: str
    created_at: datetime
    provider: str | None = None
    fee: Decimal | None = None
    fee_bearer: str | None = None
    payer_amount: Decimal | None = None
    recipient_amount: Decimal | None = None
    note: str | None = None
    destination: dict[str, str] | None = None
    failure_reason: str | None = None
    completed_at: datetime | None = None
    channel: str = "api"
    settlement_status: str | None = None
    reconciliation_status: str = "unchecked"
    reconciliation_checked_at: datetime | None = None
    parent: dict[str, str] | None = None
    compensation: dict[str, str] | None = None
    id: str = field(default_factory=lambda: new_id("txn_"))
    seq: int = 0

    def to_wire(self) -> dict[str, Any]:
        """The collection/payout record as the spec shapes it (left-out fields omitted)."""
        out: dict[str, Any] = {
            "reference": self.reference,
            "amount": fmt(self.amount),
            "currency": self.currency,
            "status": self.status,
        }
        if self.provider is not None:
            out["provider"] = self.provider
        if self.fee is not None:
            out["fee"] = fmt(self.fee)
        if self.fee_bearer is not None:
            out["feeBearer"] = self.fee_bearer
            if self.payer_amount is not None:
                out["payerAmount"] = fmt(self.payer_amount)
            if self.recipient_amount is not None:
                out["recipientAmount"] = fmt(self.recipient_amount)
        if self.note is not None:
            out["note"] = self.note
        if self.failure_reason is not None:
            out["failureReason"] = self.failure_reason
        out["createdAt"] = iso(self.created_at)
        if self.completed_at is not None:
            out["completedAt"] = iso(self.completed_at)
        out["channel"] = self.channel
        if self.settlement_status is not None:
            out["settlementStatus"] = self.settlement_status
        recon: dict[str, Any] = {"status": self.reconciliation_status}
        if self.reconciliation_checked_at is not None:
            recon["checkedAt"] = iso(self.reconciliation_checked_at)
        out["reconciliation"] = recon
        if self.parent is not None:
            out["parent"] = dict(self.parent)
        if self.compensation is not None:
            out["compensation"] = dict(self.compensation)
        return out

    def to_transaction(self) -> dict[str, Any]:
        """The item of ``GET /v1/transactions``: the record plus ``id``, ``kind``, ``direction``."""
        return {"id": self.id, "kind": self.kind, "direction": self.direction, **self.to_wire()}


@dataclass
class SettlementItem:
    """One payment of a settlement run to one destination."""

    destination: dict[str, Any]
    amount: Decimal
    movement: Movement
    status: str = "pending"  # pending, settled, failed


@dataclass
class SettlementRun:
    """A settlement run (scheduled, on demand or a resettlement)."""

    id: str
    reference: str
    currency: str
    started_at: datetime
    items: list[SettlementItem] = field(default_factory=list)
    status: str = "running"
    outcome: str | None = None
    completed_at: datetime | None = None
    trigger: str = "manual"  # manual, scheduled, resettlement
    retry_of: str | None = None
    retried_by: str | None = None
    seq: int = 0

    @property
    def total(self) -> Decimal:
        """Planned amount while running; the amount actually settled once completed."""
        if self.status == "completed":
            return sum((i.amount for i in self.items if i.status == "settled"), Decimal("0"))
        return sum((i.amount for i in self.items), Decimal("0"))

    def to_wire(self, *, with_id: bool = True) -> dict[str, Any]:
        """The settlement run record (webhook data leaves out ``id``)."""
        out: dict[str, Any] = {}
        if with_id:
            out["id"] = self.id
        out.update(
            {
                "reference": self.reference,
                "status": self.status,
                "itemCount": len(self.items),
                "total": fmt(self.total),
                "currency": self.currency,
                "startedAt": iso(self.started_at),
            }
        )
        if self.outcome is not None:
            out["outcome"] = self.outcome
        if self.completed_at is not None:
            out["completedAt"] = iso(self.completed_at)
        return out


@dataclass(frozen=True)
class Event:
    """A recorded state change (webhook envelope), kept per business and environment."""

    id: str
    seq: int
    type: str
    created_at: datetime
    data: dict[str, Any]
    business_id: str
    environment: str

    def to_wire(self) -> dict[str, Any]:
        """The webhook envelope."""
        return {"id": self.id, "type": self.type, "createdAt": iso(self.created_at), "data": self.data}
