"""Collections: acceptance, the clock-driven lifecycle, wallet credit, settlementStatus and reconciliation.

Money: nothing moves until the collection is ``settled``; then ``recipientAmount`` (amount − fee, the fee
bearer is ``non_initiator``) is credited to the wallet and ``settlementStatus`` becomes ``eligible``.
Inbound limit usage counts ``amount`` at acceptance and is given back on failed/expired.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from payops.connectors.payments.models import (
    COLLECTION_FAILED_STATUSES,
    COLLECTION_FINAL_STATUSES,
    CollectionRequest,
)

from ..errors import invalid
from ..money import collection_fee, split_by_fee_bearer
from ..records import Movement
from ..references import Outcome, claim_reference, fingerprint, remember_reference
from ..resources import CollectionWatcher
from ..state import PROVIDER_CURRENCIES, PROVIDERS, EnvState
from .payouts import DESTINATION_PATTERNS

COLLECTION_NS = "collection"
FINAL = COLLECTION_FINAL_STATUSES

# Test values: last four digits of the payer value → steps (fraction of delivery_delay, status, reason).
Step = tuple[float, str, str | None]
DEFAULT_STEPS: list[Step] = [(0.5, "dispatched", None), (1.0, "settled", None)]
TEST_VALUES: dict[str, list[Step]] = {
    "0001": [(0.5, "dispatched", None), (1.0, "failed", "payer_declined")],
    "0002": [(0.5, "dispatched", None), (1.0, "failed", "insufficient_funds")],
    "0003": [(0.5, "in_review", None), (1.0, "settled", None)],
    "0004": [(0.5, "held", None)],
    "0006": [(0.5, "dispatched", None)],
    "0007": [(0.5, "in_review", None)],
    "0008": [(0.5, "dispatched", None), (1.0, "expired", None)],
}
MISMATCH_SUFFIX = "0009"  # settled, but reconciliation ends ``mismatched``


def steps_for(payer_value: str) -> list[Step]:
    """The deterministic lifecycle of a collection from ``payer_value``."""
    return TEST_VALUES.get(payer_value[-4:], DEFAULT_STEPS)


def check_request(env: EnvState, body: CollectionRequest) -> None:
    """400 ``invalid_input`` for what the wire model cannot know: provider, currency, payer format."""
    provider = PROVIDERS.get(body.provider)
    if provider is None:
        raise invalid("provider", f"unknown provider {body.provider!r}")
    if body.provider not in env.providers:
        raise invalid("provider", f"provider {body.provider!r} is not available to this account")
    if body.currency not in PROVIDER_CURRENCIES:
        raise invalid("currency", f"currency {body.currency} is not supported by {body.provider}")
    if body.payer.type != provider["destination"]:
        raise invalid("payer.type", f"provider {body.provider} collects from {provider['destination']}")
    if not DESTINATION_PATTERNS[body.payer.type].fullmatch(body.payer.value):
        raise invalid("payer.value", f"not a valid {body.payer.type}")


def accept_collection(env: EnvState, body: CollectionRequest, now: datetime, delay_s: float) -> Outcome:
    """``POST /v1/collections``: 202 with the record; same reference + same request replays; else 409."""
    fp = fingerprint(body.to_wire())
    replay = claim_reference(env, COLLECTION_NS, body.reference, fp)
    if replay is not None:
        return replay
    env.limits.check(body.currency, "in", body.amount, now)
    fee = collection_fee(body.amount)
    payer_amount, recipient_amount = split_by_fee_bearer(body.amount, fee, "non_initiator")
    if recipient_amount <= 0:
        raise invalid("amount", "fee cannot be priced: the amount does not cover the collection fee")
    env.limits.add(body.currency, "in", body.amount, now)
    collection = start_collection(
        env,
        reference=body.reference,
        amount=body.amount,
        currency=body.currency,
        provider=body.provider,
        payer=body.payer.to_wire(),
        now=now,
        delay_s=delay_s,
        note=body.note,
        fee=fee,
    )
    outcome: Outcome = (202, collection.to_wire())
    remember_reference(env, COLLECTION_NS, body.reference, fp, outcome)
    return outcome


def start_collection(
    env: EnvState,
    *,
    reference: str,
    amount: Decimal,
    currency: str,
    provider: str,
    payer: dict[str, str],
    now: datetime,
    delay_s: float,
    note: str | None = None,
    fee: Decimal | None = None,
    watcher: CollectionWatcher | None = None,
    eligible: bool = True,
) -> Movement:
    """Record a collection, its ``collection.accepted`` event and its scheduled steps.

    ``fee=None`` records no fee (internal funding collections of utility purchases); ``eligible=False``
    keeps the money out of settlements (it is spent by the purchase).
    """
    payer_amount = recipient_amount = None
    if fee is not None:
        payer_amount, recipient_amount = split_by_fee_bearer(amount, fee, "non_initiator")
    collection = Movement(
        kind="collection",
        direction="in",
        reference=reference,
        amount=amount,
        currency=currency,
        status="accepted",
        created_at=now,
        provider=provider,
        fee=fee,
        fee_bearer="non_initiator" if fee is not None else None,
        payer_amount=payer_amount,
        recipient_amount=recipient_amount,
        note=note,
        destination=dict(payer),
        settlement_status="not_eligible",
    )
    ext = env.resources
    ext.collections[reference] = collection
    if watcher is not None:
        ext.collection_watchers.setdefault(reference, []).append(watcher)
    env.add_transaction(collection)
    env.record_event("collection.accepted", now, collection.to_wire())
    for fraction, status, reason in steps_for(payer["value"]):
        env.schedule(
            now + timedelta(seconds=delay_s * fraction),
            lambda at, s=status, r=reason: transition(env, collection, s, r, at, eligible=eligible),
        )
    return collection


def transition(
    env: EnvState,
    collection: Movement,
    status: str,
    reason: str | None,
    at: datetime,
    *,
    eligible: bool = True,
) -> None:
    """Move a collection to ``status``: wallet credit, limits, settlementStatus, reconciliation, event."""
    if collection.status == status or collection.status in FINAL:
        return
    if status == "settled":
        credited = (
            collection.recipient_amount if collection.recipient_amount is not None else collection.amount
        )
        env.wallet.credit(collection.currency, credited, at, f"{collection.reference}:collection")
        if eligible:
            collection.settlement_status = "eligible"
    elif status in COLLECTION_FAILED_STATUSES:
        if collection.fee is not None:
            env.limits.remove(collection.currency, "in", collection.amount, collection.created_at)
        collection.failure_reason = reason
    collection.status = status
    if status in FINAL:
        collection.completed_at = at
        mismatched = status == "settled" and str((collection.destination or {}).get("value", "")).endswith(
            MISMATCH_SUFFIX
        )
        collection.reconciliation_status = "mismatched" if mismatched else "matched"
        collection.reconciliation_checked_at = at
    env.record_event("collection.status_changed", at, collection.to_wire())
    if status in FINAL:
        for watcher in env.resources.collection_watchers.pop(collection.reference, []):
            watcher(collection, at)


def on_settlement_event(env: EnvState, data: dict[str, object]) -> None:
    """Follow settlement runs (part-1 engine) through their events.

    A run that starts claims every ``eligible`` collection of its currency (``claimed``); when it finishes
    with outcome ``settled`` or ``failed_partial`` its claims become ``settled``; ``failed_all`` makes them
    ``eligible`` again (the next run, or a resettlement, claims them anew).
    """
    ext = env.resources
    run = next((r for r in reversed(env.settlement_runs) if r.reference == data.get("reference")), None)
    if run is None:
        return
    if data.get("status") == "running":
        for ref, collection in ext.collections.items():
            if collection.settlement_status == "eligible" and collection.currency == run.currency:
                collection.settlement_status = "claimed"
                ext.collection_claims[ref] = run.id
        return
    settled = data.get("outcome") in {"settled", "failed_partial"}
    for ref, run_id in list(ext.collection_claims.items()):
        if run_id == run.id:
            ext.collections[ref].settlement_status = "settled" if settled else "eligible"
            del ext.collection_claims[ref]
