"""Payouts and payout batches: validation beyond the wire model, acceptance, and the clock-driven lifecycle.

Money: ``amount + fee`` is reserved at acceptance, debited at delivery, released on failure, and credited
back when a delivered payout is refunded. Outbound limit usage counts ``amount`` and is given back on failure.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from payops.connectors.payments.models import PAYOUT_FINAL_STATUSES, PayoutBatchRequest, PayoutRequest

from ..errors import ApiError, invalid
from ..ledger import InsufficientFunds
from ..money import payout_fee, split_by_fee_bearer
from ..records import Movement, new_id
from ..references import Outcome, claim_reference, fingerprint, remember_reference
from ..state import PROVIDER_CURRENCIES, PROVIDERS, EnvState

PAYOUT_NS = "payout"
BATCH_NS = "payout_batch"
FINAL = PAYOUT_FINAL_STATUSES

DESTINATION_PATTERNS = {
    "msisdn": re.compile(r"^\+?[0-9]{9,15}$"),
    "account": re.compile(r"^[A-Za-z0-9-]{4,34}$"),
    "card": re.compile(r"^[A-Za-z0-9_-]{4,64}$"),
}

# Test values: last four digits of the destination value → steps (fraction of delivery_delay, status, reason).
Step = tuple[float, str, str | None]
DEFAULT_STEPS: list[Step] = [(0.5, "dispatching", None), (1.0, "delivered", None)]
TEST_VALUES: dict[str, list[Step]] = {
    "0001": [(0.5, "dispatching", None), (1.0, "failed", "insufficient_funds_at_provider")],
    "0002": [(0.5, "dispatching", None), (1.0, "failed", "account_not_found")],
    "0003": [(0.5, "in_review", None), (1.0, "delivered", None)],
    "0004": [(0.5, "held", None)],
    "0005": [(0.5, "dispatching", None), (1.0, "delivered", None), (1.5, "refunded", None)],
    "0006": [(0.5, "dispatching", None)],
    "0007": [(0.5, "in_review", None)],
}


def steps_for(destination_value: str) -> list[Step]:
    """The deterministic lifecycle of a payout to ``destination_value``."""
    return TEST_VALUES.get(destination_value[-4:], DEFAULT_STEPS)


def check_item(env: EnvState, item: PayoutRequest, prefix: str = "") -> None:
    """400 ``invalid_input`` for what the wire model cannot know: provider, currency, destination format."""
    provider = PROVIDERS.get(item.provider)
    if provider is None:
        raise invalid(f"{prefix}provider", f"unknown provider {item.provider!r}")
    if item.provider not in env.providers:
        raise invalid(f"{prefix}provider", f"provider {item.provider!r} is not available to this account")
    if item.currency not in PROVIDER_CURRENCIES:
        raise invalid(f"{prefix}currency", f"currency {item.currency} is not supported by {item.provider}")
    if item.destination.type != provider["destination"]:
        raise invalid(
            f"{prefix}destination.type",
            f"provider {item.provider} pays to {provider['destination']}, not {item.destination.type}",
        )
    if not DESTINATION_PATTERNS[item.destination.type].fullmatch(item.destination.value):
        raise invalid(f"{prefix}destination.value", f"not a valid {item.destination.type}")


def item_fingerprint(item: PayoutRequest) -> tuple[str | None, ...]:
    """Identity of a payout request (normalised: ``"10"`` and ``"10.00"`` are the same amount)."""
    return (
        item.reference,
        format(item.amount.normalize(), "f"),
        item.currency,
        item.provider,
        item.destination.type,
        item.destination.value,
        item.note,
    )


def accept_payout(
    env: EnvState, item: PayoutRequest, now: datetime, delay_s: float, fp: object | None = None
) -> Outcome:
    """Accept one (already checked) payout, or raise the refusal a single payout would get.

    Same reference and same request as before → the first answer again; other request → 409.
    """
    fp = item_fingerprint(item) if fp is None else fp
    replay = claim_reference(env, PAYOUT_NS, item.reference, fp)
    if replay is not None:
        return replay
    amount: Decimal = item.amount
    env.limits.check(item.currency, "out", amount, now)
    fee = payout_fee(amount)
    payer_amount, recipient_amount = split_by_fee_bearer(amount, fee, "initiator")
    try:
        env.wallet.reserve(item.currency, payer_amount, now, item.reference)
    except InsufficientFunds:
        raise ApiError(403, "insufficient_balance", "wallet balance does not cover amount plus fee") from None
    env.limits.add(item.currency, "out", amount, now)
    payout = Movement(
        kind="payout",
        direction="out",
        reference=item.reference,
        amount=amount,
        currency=item.currency,
        status="accepted",
        created_at=now,
        provider=item.provider,
        fee=fee,
        fee_bearer="initiator",
        payer_amount=payer_amount,
        recipient_amount=recipient_amount,
        note=item.note,
        destination=item.destination.to_wire(),
    )
    env.payouts[item.reference] = payout
    env.add_transaction(payout)
    record = payout.to_wire()
    env.record_event("payout.accepted", now, record)
    for fraction, status, reason in steps_for(item.destination.value):
        env.schedule(
            now + timedelta(seconds=delay_s * fraction),
            lambda at, s=status, r=reason: transition(env, payout, s, r, at),
        )
    outcome: Outcome = (202, record)
    remember_reference(env, PAYOUT_NS, item.reference, fp, outcome)
    return outcome


def transition(env: EnvState, payout: Movement, status: str, reason: str | None, at: datetime) -> None:
    """Move a payout to ``status`` at ``at``: money, limits, completion time, reconciliation, event."""
    if payout.status == status:
        return
    total = payout.payer_amount if payout.payer_amount is not None else payout.amount
    if status == "delivered":
        env.wallet.debit(payout.currency, total, at, payout.reference)
    elif status == "failed":
        env.wallet.release(payout.currency, total, at, payout.reference)
        env.limits.remove(payout.currency, "out", payout.amount, payout.created_at)
        payout.failure_reason = reason
    elif status == "refunded":
        env.wallet.credit(payout.currency, total, at, f"{payout.reference}:refund")
    payout.status = status
    if status in FINAL:
        payout.completed_at = at
        payout.reconciliation_status = "matched"
        payout.reconciliation_checked_at = at
    env.record_event("payout.status_changed", at, payout.to_wire())


def accept_batch(env: EnvState, batch: PayoutBatchRequest, now: datetime, delay_s: float) -> Outcome:
    """Batch rules 1, 2 and 4: each item accepted or refused on its own, limits per item, replays kept."""
    item_fps = [item_fingerprint(i) for i in batch.items]
    fp = fingerprint(batch.reference, item_fps)
    replay = claim_reference(env, BATCH_NS, batch.reference, fp)
    if replay is not None:
        return replay
    items: list[dict[str, Any]] = []
    for item, item_fp in zip(batch.items, item_fps, strict=True):
        try:
            status, payout = accept_payout(env, item, now, delay_s, item_fp)
            items.append({"reference": item.reference, "status": status, "payout": payout})
        except ApiError as err:
            if err.status >= 500:
                raise
            items.append({"reference": item.reference, "status": err.status, "error": err.body()["error"]})
    outcome: Outcome = (200, {"batchId": new_id(), "reference": batch.reference, "items": items})
    remember_reference(env, BATCH_NS, batch.reference, fp, outcome)
    return outcome
