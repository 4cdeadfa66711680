"""Records of collections, checkouts, utility purchases, transfers and webhook deliveries, and
``EnvResources``: their book in one business environment (``EnvState.resources``).

The event hook that drives them (webhook fan-out, settlement claims) is wired by ``create_app``
(``sandbox.engine.hooks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from .clock import iso
from .money import ZERO, fmt
from .records import Event, Movement, new_id

#: Callback run when a collection reaches a final status: ``(collection, at)``.
CollectionWatcher = Callable[[Movement, datetime], None]


@dataclass
class TransferRecord:
    """A wallet transfer as the sender (``direction="out"``) or the recipient (``"in"``) sees it."""

    reference: str
    amount: Decimal
    currency: str
    status: str
    created_at: datetime
    recipient_handle: str
    recipient_name: str
    sender_handle: str
    failure_reason: str | None = None

    def to_wire(self, *, received: bool = False) -> dict[str, Any]:
        """The Transfer record; the recipient's copy also names the sender (``senderHandle``)."""
        out: dict[str, Any] = {
            "reference": self.reference,
            "amount": fmt(self.amount),
            "currency": self.currency,
            "status": self.status,
            "recipientHandle": self.recipient_handle,
            "recipientName": self.recipient_name,
        }
        if self.failure_reason is not None:
            out["failureReason"] = self.failure_reason
        out["createdAt"] = iso(self.created_at)
        if received:
            out["senderHandle"] = self.sender_handle
        return out


@dataclass
class CheckoutAttemptRecord:
    """One payment attempt on a checkout (one collection)."""

    collection_reference: str
    provider: str
    payer: str  # masked
    amount: Decimal
    created_at: datetime
    status: str = "pending"  # pending, succeeded, failed
    failure_reason: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The CheckoutAttempt object."""
        out: dict[str, Any] = {
            "collectionReference": self.collection_reference,
            "provider": self.provider,
            "payer": self.payer,
            "status": self.status,
            "createdAt": iso(self.created_at),
            "amount": fmt(self.amount),
        }
        if self.failure_reason is not None:
            out["failureReason"] = self.failure_reason
        return out


@dataclass
class CheckoutRecord:
    """A hosted checkout (payment link)."""

    id: str
    reference: str
    token: str
    url: str
    environment: str
    currency: str
    amount_type: str
    usage: str
    created_at: datetime
    amount: Decimal | None = None
    min_amount: Decimal | None = None
    max_amount: Decimal | None = None
    suggested_amounts: list[Decimal] = field(default_factory=list)
    description: str | None = None
    success_url: str | None = None
    cancel_url: str | None = None
    expires_at: datetime | None = None
    status: str = "open"
    paid_at: datetime | None = None
    collection_reference: str | None = None
    payments_count: int = 0
    total_collected: Decimal = ZERO
    attempts: list[CheckoutAttemptRecord] = field(default_factory=list)
    seq: int = 0

    def to_wire(self, *, with_attempts: bool = False) -> dict[str, Any]:
        """The Hosted checkout record (``attempts`` only on the single read)."""
        money = lambda v: None if v is None else fmt(v)  # noqa: E731
        out: dict[str, Any] = {
            "id": self.id,
            "reference": self.reference,
            "amount": money(self.amount),
            "currency": self.currency,
            "environment": self.environment,
            "status": self.status,
            "url": self.url,
            "expiresAt": iso(self.expires_at) if self.expires_at else None,
            "paidAt": iso(self.paid_at) if self.paid_at else None,
            "collectionReference": self.collection_reference,
            "createdAt": iso(self.created_at),
            "amountType": self.amount_type,
            "minAmount": money(self.min_amount),
            "maxAmount": money(self.max_amount),
            "suggestedAmounts": [fmt(a) for a in self.suggested_amounts],
            "usage": self.usage,
            "paymentsCount": self.payments_count,
            "totalCollected": fmt(self.total_collected),
        }
        for key, value in (
            ("description", self.description),
            ("successUrl", self.success_url),
            ("cancelUrl", self.cancel_url),
        ):
            if value is not None:
                out[key] = value
        if with_attempts:
            out["attempts"] = [a.to_wire() for a in self.attempts]
        return out


@dataclass
class PurchaseRecord:
    """A utility purchase; ``movement`` is its line in the transaction list (kind ``utility``)."""

    reference: str
    product: dict[str, str]
    msisdn: str
    amount: Decimal
    currency: str
    fee: Decimal
    funding: dict[str, Any]
    created_at: datetime
    movement: Movement
    status: str = "accepted"
    failure_reason: str | None = None
    reserved: Decimal = ZERO  # money currently held in the wallet for this purchase

    @property
    def gross(self) -> Decimal:
        """Amount plus fee."""
        return self.amount + self.fee

    def to_wire(self) -> dict[str, Any]:
        """The Utility purchase record."""
        out: dict[str, Any] = {
            "reference": self.reference,
            "status": self.status,
            "product": dict(self.product),
            "beneficiary": {"msisdn": self.msisdn},
            "amount": fmt(self.amount),
            "currency": self.currency,
            "fee": fmt(self.fee),
            "gross": fmt(self.gross),
            "funding": dict(self.funding),
        }
        if self.failure_reason is not None:
            out["failureReason"] = self.failure_reason
        out["createdAt"] = iso(self.created_at)
        return out


@dataclass
class WebhookEndpoint:
    """A webhook endpoint registered through the console-equivalent admin API."""

    id: str
    url: str
    secret: str
    created_at: datetime
    updated_at: datetime
    event_types: list[str] | None = None  # None = every type
    enabled: bool = True
    description: str | None = None
    legacy: bool = False  # made before utility/settlement/transfer events existed (Versioning 5)
    old_secret: str | None = None
    old_secret_expires_at: datetime | None = None

    def subscribes(self, type_: str) -> bool:
        """True when the endpoint receives events of ``type_``."""
        return self.event_types is None or type_ in self.event_types

    def secrets_at(self, now: datetime) -> list[str]:
        """Signing secrets at ``now``: the current one, plus the old one for 24 h after a rotation."""
        out = [self.secret]
        if (
            self.old_secret is not None
            and self.old_secret_expires_at is not None
            and now < self.old_secret_expires_at
        ):
            out.append(self.old_secret)
        return out

    def to_wire(self) -> dict[str, Any]:
        """Admin view (never the secret)."""
        out: dict[str, Any] = {
            "id": self.id,
            "url": self.url,
            "eventTypes": self.event_types,
            "enabled": self.enabled,
            "legacy": self.legacy,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
        }
        if self.description is not None:
            out["description"] = self.description
        if self.old_secret_expires_at is not None:
            out["oldSecretExpiresAt"] = iso(self.old_secret_expires_at)
        return out


@dataclass
class DeliveryAttempt:
    """One HTTP attempt of a delivery."""

    at: datetime
    duration_ms: int
    status_code: int | None = None
    error_class: str | None = None  # timeout, network, refused, redirect, http_4xx, http_5xx
    response_start: str = ""

    def to_wire(self) -> dict[str, Any]:
        """Delivery-log entry."""
        return {
            "at": iso(self.at),
            "statusCode": self.status_code,
            "durationMs": self.duration_ms,
            "errorClass": self.error_class,
            "responseStart": self.response_start,
        }


@dataclass
class Delivery:
    """The delivery of one event to one endpoint (a replay is a new delivery with the same event)."""

    id: str
    endpoint_id: str
    event: Event
    created_at: datetime
    next_attempt_at: datetime | None
    status: str = "pending"  # pending, succeeded, failed, cancelled
    attempts: list[DeliveryAttempt] = field(default_factory=list)
    in_flight: bool = False
    replay_of: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """Delivery-log record."""
        out: dict[str, Any] = {
            "id": self.id,
            "endpointId": self.endpoint_id,
            "eventId": self.event.id,
            "eventType": self.event.type,
            "status": self.status,
            "attemptCount": len(self.attempts),
            "createdAt": iso(self.created_at),
            "attempts": [a.to_wire() for a in self.attempts],
        }
        if self.status == "pending" and self.next_attempt_at is not None:
            out["nextAttemptAt"] = iso(self.next_attempt_at)
        if self.replay_of is not None:
            out["replayOf"] = self.replay_of
        return out


@dataclass
class EnvResources:
    """Collections, checkouts, purchases, transfers and webhooks of one business environment."""

    collections: dict[str, Movement] = field(default_factory=dict)
    collection_watchers: dict[str, list[CollectionWatcher]] = field(default_factory=dict)
    collection_claims: dict[str, str] = field(
        default_factory=dict
    )  # collection reference -> settlement run id
    transfers: dict[str, TransferRecord] = field(default_factory=dict)
    checkouts: dict[str, CheckoutRecord] = field(default_factory=dict)  # by id, insertion = creation order
    purchases: dict[str, PurchaseRecord] = field(default_factory=dict)
    endpoints: dict[str, WebhookEndpoint] = field(default_factory=dict)
    deliveries: dict[str, Delivery] = field(default_factory=dict)
    event_index: dict[str, int] = field(default_factory=dict)  # event id -> seq
    feed_from_seq: int | None = None  # events with a higher seq exist for the feed (first endpoint)
    gated_from_seq: int | None = None  # utility/settlement/transfer events: first non-legacy create or edit


def new_checkout_token() -> str:
    """Public bearer token carried in a checkout URL."""
    return new_id("cot_")
