"""Wallet transfers between businesses, addressed by handle: hold and confirm in one request, no fee.

Money: the sender's wallet is debited and the recipient's credited in the same locked section, so money is
conserved across businesses. Outbound limit usage counts ``amount`` on the sender.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from payops.connectors.payments.models import TransferRequest

from ..errors import ApiError, invalid, not_found
from ..ledger import InsufficientFunds
from ..records import Business, Movement
from ..references import Outcome, fingerprint
from ..resources import TransferRecord
from ..state import PROVIDER_CURRENCIES, EnvState, ReferenceEntry

TRANSFER_NS = "transfer"

#: Test values by the cents of the amount.
REFUSED_CENTS = "91"  # 400 transfer_refused (hold refused)
NOT_HELD_CENTS = "92"  # 409 transfer_not_held (hold lapsed before confirmation)
DECLINED_CENTS = "93"  # 200, status declined (recipient_declined)
FAILED_CENTS = "94"  # 200, status failed (processing_error)


def _cents(amount: Decimal) -> str:
    return format(amount.quantize(Decimal("0.01")), "f")[-2:]


def recipient_of(env: EnvState, handle: str) -> Business:
    """The business behind ``handle`` (404 ``not_found``)."""
    business = env.sandbox.business_by_handle(handle)
    if business is None or (business.id, env.environment) not in env.sandbox.envs:
        raise not_found(f"recipient handle {handle!r}")
    return business


def send_transfer(env: EnvState, body: TransferRequest, now: datetime) -> Outcome:
    """``POST /v1/transfers``: 200 with the Transfer, or the refusal (nothing moves on a refusal)."""
    fp = fingerprint(body.to_wire())
    entry = env.references.get((TRANSFER_NS, body.reference))
    if entry is not None:
        if entry.fingerprint != fp:
            raise ApiError(
                409, "reference_reused", f"reference {body.reference!r} was used for another transfer"
            )
        return entry.status, entry.payload
    if body.currency not in PROVIDER_CURRENCIES:
        raise invalid("currency", f"currency {body.currency} is not supported")
    recipient = recipient_of(env, body.handle)
    if recipient.id == env.business.id:
        raise ApiError(400, "transfer_refused", "a business cannot transfer to itself")
    cents = _cents(body.amount)
    if cents == REFUSED_CENTS:
        raise ApiError(400, "transfer_refused", "transfer hold refused; nothing left the wallet")
    env.limits.check(body.currency, "out", body.amount, now)
    if env.wallet.available[body.currency] < body.amount:
        raise ApiError(
            400, "transfer_refused", "wallet balance does not cover the transfer; nothing left the wallet"
        )
    if cents == NOT_HELD_CENTS:
        raise ApiError(409, "transfer_not_held", "the transfer hold lapsed and can no longer be confirmed")
    record = TransferRecord(
        reference=body.reference,
        amount=body.amount,
        currency=body.currency,
        status="completed",
        created_at=now,
        recipient_handle=recipient.handle,
        recipient_name=recipient.name,
        sender_handle=env.business.handle,
    )
    target = env.sandbox.env(recipient.id, env.environment)
    if cents == DECLINED_CENTS or recipient.status != "active":
        record.status = "declined"
        record.failure_reason = (
            "recipient_declined" if recipient.status == "active" else "recipient_unavailable"
        )
    elif cents == FAILED_CENTS:
        record.status, record.failure_reason = "failed", "processing_error"
    else:
        _move(env, target, record, now)
    env.resources.transfers[body.reference] = record
    env.record_event("transfer.status_changed", now, record.to_wire())
    if record.status == "completed":
        target.record_event("transfer.received", now, record.to_wire(received=True))
    outcome: Outcome = (200, record.to_wire())
    env.references[(TRANSFER_NS, body.reference)] = ReferenceEntry(fp, *outcome)
    return outcome


def _move(sender: EnvState, recipient: EnvState, record: TransferRecord, now: datetime) -> None:
    try:
        sender.wallet.debit_available(record.currency, record.amount, now, f"{record.reference}:transfer")
    except InsufficientFunds:
        raise ApiError(400, "transfer_refused", "wallet balance does not cover the transfer") from None
    recipient.wallet.credit(record.currency, record.amount, now, f"{record.reference}:transfer")
    sender.limits.add(record.currency, "out", record.amount, now)
    recipient.limits.add(record.currency, "in", record.amount, now)
    common = dict(
        reference=record.reference,
        amount=record.amount,
        currency=record.currency,
        status="completed",
        created_at=now,
        completed_at=now,
        reconciliation_status="matched",
        reconciliation_checked_at=now,
    )
    sender.add_transaction(Movement(kind="wallet_transfer", direction="out", **common))  # type: ignore[arg-type]
    recipient.add_transaction(Movement(kind="wallet_transfer", direction="in", **common))  # type: ignore[arg-type]
