"""What the platform does on its own, where the spec leaves it to the platform (admin hooks drive it).

* ``set_reconciliation``: the platform's check of a payout against the provider (``mismatched`` or back to
  ``unchecked``); the spec shows no transition, so nothing else changes and no event is sent.
* ``reverse_payout``: a late refund of a delivered payout. The reversal is its own movement (kind ``payout``,
  direction ``in``, reference ``rvr-<reference>``, the prefix the spec keeps for reversals) whose ``parent``
  links the payout; the payout turns ``refunded`` with a ``compensation`` link to it, and the payer amount
  returns to the wallet. A ``payout.status_changed`` event is recorded.
* ``adjust``: the platform records another fee or amount on a payout (the provider charged more or less,
  delivered part); the wallet moves by the difference (reserved while in progress, available once delivered).
* ``outside_movement``: a movement made outside the API's caller (for example in the service's dashboard):
  a payout that leaves at once, or a collection that settles at once, with its transaction line.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from payops.connectors.payments.models import PAYOUT_FINAL_STATUSES

from ..errors import ApiError, not_found
from ..ledger import InsufficientFunds
from ..money import payout_fee, q
from ..records import Movement
from ..state import EnvState

REVERSAL_PREFIX = "rvr-"


def _payout(env: EnvState, reference: str) -> Movement:
    payout = env.payouts.get(reference)
    if payout is None:
        raise not_found(f"payout {reference}")
    return payout


def set_reconciliation(env: EnvState, reference: str, status: str, at: datetime) -> Movement:
    """The platform's reconciliation result on a payout (``unchecked`` clears ``checkedAt``)."""
    payout = _payout(env, reference)
    payout.reconciliation_status = status
    payout.reconciliation_checked_at = None if status == "unchecked" else at
    return payout


def reverse_payout(env: EnvState, reference: str, at: datetime) -> Movement:
    """Refund a delivered payout with a reversal movement (409 ``not_delivered`` otherwise)."""
    payout = _payout(env, reference)
    if payout.status != "delivered":
        raise ApiError(409, "not_delivered", f"payout {reference} is {payout.status}, not delivered")
    total = payout.payer_amount if payout.payer_amount is not None else payout.amount
    reversal = Movement(
        kind="payout",
        direction="in",
        reference=(REVERSAL_PREFIX + reference)[:64],
        amount=total,
        currency=payout.currency,
        status="delivered",
        created_at=at,
        completed_at=at,
        provider=payout.provider,
        reconciliation_status="matched",
        reconciliation_checked_at=at,
        parent={"type": "payout", "reference": payout.reference},
    )
    env.wallet.credit(payout.currency, total, at, reversal.reference)
    env.add_transaction(reversal)
    payout.status = "refunded"
    payout.completed_at = at
    payout.compensation = {"type": "payout", "reference": reversal.reference}
    env.record_event("payout.status_changed", at, payout.to_wire())
    return reversal


def adjust(
    env: EnvState, reference: str, at: datetime, *, fee: Decimal | None = None, amount: Decimal | None = None
) -> Movement:
    """Record another ``fee`` and/or ``amount`` on a payout; the wallet follows the payer amount."""
    payout = _payout(env, reference)
    if payout.status == "failed":
        raise ApiError(409, "payout_failed", f"payout {reference} failed: nothing was charged")
    new_fee = q(fee) if fee is not None else payout.fee or Decimal(0)
    new_amount = q(amount) if amount is not None else payout.amount
    old_total = payout.payer_amount if payout.payer_amount is not None else payout.amount
    difference = q(new_amount + new_fee) - old_total
    tag = f"{reference}:adjustment"
    try:
        if payout.status not in PAYOUT_FINAL_STATUSES:  # still reserved: the reservation follows
            if difference > 0:
                env.wallet.reserve(payout.currency, difference, at, tag)
            elif difference < 0:
                env.wallet.release(payout.currency, -difference, at, tag)
        elif difference > 0:
            env.wallet.debit_available(payout.currency, difference, at, tag)
        elif difference < 0:
            env.wallet.credit(payout.currency, -difference, at, tag)
    except InsufficientFunds:
        raise ApiError(409, "insufficient_balance", "the wallet cannot cover the difference") from None
    payout.fee, payout.amount = new_fee, new_amount
    payout.payer_amount, payout.recipient_amount = q(new_amount + new_fee), new_amount
    return payout


def outside_movement(
    env: EnvState, kind: str, reference: str, amount: Decimal, currency: str, at: datetime
) -> Movement:
    """A payout (money out, with its fee) or a collection (money in, no fee) made outside the API."""
    book = env.payouts if kind == "payout" else env.resources.collections
    if reference in book:
        raise ApiError(409, "duplicate_reference", f"{kind} {reference} exists")
    amount = q(amount)
    if kind == "payout":
        fee = payout_fee(amount)
        movement = Movement(
            kind="payout",
            direction="out",
            reference=reference,
            amount=amount,
            currency=currency,
            status="delivered",
            created_at=at,
            completed_at=at,
            provider="mtn",
            fee=fee,
            fee_bearer="initiator",
            payer_amount=q(amount + fee),
            recipient_amount=amount,
            reconciliation_status="matched",
            reconciliation_checked_at=at,
        )
        try:
            env.wallet.debit_available(currency, movement.payer_amount or amount, at, reference)
        except InsufficientFunds:
            raise ApiError(409, "insufficient_balance", "the wallet cannot cover the payout") from None
        env.payouts[reference] = movement
        env.add_transaction(movement)
        env.record_event("payout.status_changed", at, movement.to_wire())
        return movement
    movement = Movement(
        kind="collection",
        direction="in",
        reference=reference,
        amount=amount,
        currency=currency,
        status="settled",
        created_at=at,
        completed_at=at,
        provider="mtn",
        settlement_status="not_eligible",
        reconciliation_status="matched",
        reconciliation_checked_at=at,
    )
    env.wallet.credit(currency, amount, at, reference)
    env.resources.collections[reference] = movement
    env.add_transaction(movement)
    env.record_event("collection.status_changed", at, movement.to_wire())
    return movement
