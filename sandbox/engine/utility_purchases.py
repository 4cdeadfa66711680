"""Airtime and data: product list, fee quotes, purchases (wallet or collection funding) and their lifecycle.

Money: wallet funding reserves ``gross`` (amount + fee) at acceptance; collection funding credits the payer's
``gross`` when the collection settles and reserves it then. ``delivered`` debits the reservation; a failed
or refunded sale releases it (wallet) or pays it back to the payer (collection); ``outcome_unknown`` and
``refund_failed`` keep it held. Outbound limit usage counts ``amount``, given back on failed/refunded.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from payops.connectors.payments.models import (
    UTILITY_PURCHASE_FAILED_STATUSES,
    UTILITY_PURCHASE_FINAL_STATUSES,
    UtilityPurchaseRequest,
)

from ..errors import ApiError, invalid, not_found
from ..money import ZERO, fmt, q
from ..records import Movement, new_id
from ..references import Outcome, claim_reference, fingerprint, remember_reference
from ..resources import PurchaseRecord
from ..state import EnvState
from .collections import start_collection

PURCHASE_NS = "utility_purchase"
CURRENCY = "GHS"
FEE_RATE, FEE_MIN = Decimal("0.01"), Decimal("0.10")
FINAL = UTILITY_PURCHASE_FINAL_STATUSES


def _p(
    pid: str,
    category: str,
    network: str,
    name: str,
    *,
    price: str | None = None,
    lo: str | None = None,
    hi: str | None = None,
    validity: str | None = None,
    delivery: str = "verified",
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": pid,
        "category": category,
        "network": network,
        "name": name,
        "kind": "fixed" if price else "flexi",
        "currency": CURRENCY,
        "delivery": delivery,
    }
    out.update({k: v for k, v in {"price": price, "min": lo, "max": hi, "validity": validity}.items() if v})
    return out


PRODUCTS: list[dict[str, Any]] = [
    _p("mtn-airtime", "airtime", "mtn", "MTN airtime", lo="1.00", hi="1000.00"),
    _p("telecel-airtime", "airtime", "telecel", "Telecel airtime", lo="1.00", hi="1000.00"),
    _p(
        "airteltigo-airtime",
        "airtime",
        "airteltigo",
        "AirtelTigo airtime",
        lo="1.00",
        hi="500.00",
        delivery="unverified",
    ),
    _p("mtn-data-1gb", "data", "mtn", "MTN 1 GB", price="10.00", validity="30 days"),
    _p("mtn-data-5gb", "data", "mtn", "MTN 5 GB", price="45.00", validity="30 days"),
    _p("telecel-data-2gb", "data", "telecel", "Telecel 2 GB", price="20.00", validity="7 days"),
    _p(
        "airteltigo-data-daily",
        "data",
        "airteltigo",
        "AirtelTigo daily 500 MB",
        price="3.00",
        validity="24 hours",
        delivery="unverified",
    ),
]
#: Known but not listed: not on sale (422 product_not_sellable) / vendor down (503 utilities_unavailable).
NOT_SELLABLE = {"mtn-data-legacy": _p("mtn-data-legacy", "data", "mtn", "MTN legacy bundle", price="8.00")}
OFFLINE = {
    "mtn-airtime-offline": _p(
        "mtn-airtime-offline", "airtime", "mtn", "MTN airtime (vendor down)", lo="1.00", hi="1000.00"
    )
}
UNPRICEABLE_AMOUNT = Decimal("999.99")  # 422 fee_unpriceable
NETWORK_PREFIXES = {
    "mtn": ("24", "25", "53", "54", "55", "59"),
    "telecel": ("20", "50"),
    "airteltigo": ("26", "27", "56", "57"),
}
GHANA_MSISDN = re.compile(r"^233[0-9]{9}$")
INVALID_SUFFIX, UNAVAILABLE_SUFFIX = "0422", "0503"  # beneficiary endings
PAYER_PROVIDERS = ("mtn", "telecel")

# Beneficiary test values: last four digits → steps after the sale starts (fraction of delivery_delay).
Step = tuple[float, str, str | None]
DEFAULT_STEPS: list[Step] = [(0.5, "vending", None), (1.0, "delivered", None)]
TEST_VALUES: dict[str, list[Step]] = {
    "0001": [(0.5, "vending", None), (1.0, "failed", "vend_failed")],
    "0002": [(0.5, "vending", None), (1.0, "refunding", "vend_failed"), (1.5, "refunded", "vend_failed")],
    "0003": [(0.5, "vending", None), (1.0, "outcome_unknown", None), (2.0, "delivered", None)],
    "0004": [(0.5, "vending", None), (1.0, "outcome_unknown", None)],
    "0005": [
        (0.5, "vending", None),
        (1.0, "refunding", "vend_failed"),
        (1.5, "refund_failed", "vend_failed"),
    ],
    "0006": [
        (0.5, "vending", None),
        (1.0, "refunding", "vend_failed"),
        (1.5, "refund_failed", "vend_failed"),
        (3.0, "refunded", "vend_failed"),
    ],
}


def utility_fee(amount: Decimal) -> Decimal:
    """``max(0.10, round_half_up(amount * 1%))``, added on top of the amount."""
    return max(FEE_MIN, q(amount * FEE_RATE))


def product(product_id: str) -> dict[str, Any]:
    """A sellable product, or the refusal for that id."""
    for p in PRODUCTS:
        if p["id"] == product_id:
            return p
    if product_id in OFFLINE:
        raise ApiError(503, "utilities_unavailable", "utility purchases are unavailable now; retry shortly")
    if product_id in NOT_SELLABLE:
        raise ApiError(422, "product_not_sellable", f"product {product_id} is not on sale now")
    raise ApiError(404, "product_not_found", f"no utility product has id {product_id!r}")


def quote(product_id: str, amount: Decimal, currency: str) -> dict[str, str]:
    """Product, currency, amount and fee checks; the quote ``{productId, amount, currency, fee, gross}``."""
    item = product(product_id)
    if currency != CURRENCY:
        raise ApiError(422, "currency_not_supported", f"only {CURRENCY} is sold, not {currency}")
    if item["kind"] == "fixed" and amount != Decimal(item["price"]):
        raise ApiError(422, "amount_out_of_range", f"product {product_id} is sold at {item['price']}")
    if item["kind"] == "flexi" and not Decimal(item["min"]) <= amount <= Decimal(item["max"]):
        raise ApiError(422, "amount_out_of_range", f"amount must be {item['min']} to {item['max']}")
    if amount == UNPRICEABLE_AMOUNT:
        raise ApiError(422, "fee_unpriceable", "the fee cannot be worked out now; retry later")
    fee = utility_fee(amount)
    return {
        "productId": product_id,
        "amount": fmt(amount),
        "currency": currency,
        "fee": fmt(fee),
        "gross": fmt(amount + fee),
    }


def _check_beneficiary(item: dict[str, Any], msisdn: str) -> None:
    if not GHANA_MSISDN.fullmatch(msisdn) or msisdn.endswith(INVALID_SUFFIX):
        raise ApiError(422, "beneficiary_invalid", "the product cannot be sold to this number")
    if not msisdn[3:5].startswith(NETWORK_PREFIXES.get(item["network"], ())):
        raise ApiError(422, "beneficiary_invalid", f"{msisdn} is not on the {item['network']} network")
    if msisdn.endswith(UNAVAILABLE_SUFFIX):
        raise ApiError(503, "utilities_unavailable", "utility purchases are unavailable now; retry shortly")


def accept_purchase(env: EnvState, body: UtilityPurchaseRequest, now: datetime, delay_s: float) -> Outcome:
    """``POST /v1/utility-purchases``: 202 with the purchase, or the refusal."""
    fp = fingerprint(body.to_wire())
    replay = claim_reference(env, PURCHASE_NS, body.reference, fp)
    if replay is not None:
        return replay
    priced = quote(body.product_id, body.amount, body.currency)
    item = product(body.product_id)
    _check_beneficiary(item, body.beneficiary.msisdn)
    payer = body.funding.payer
    if body.funding.type == "collection":
        assert payer is not None
        if payer.provider not in PAYER_PROVIDERS or payer.provider not in env.providers:
            raise invalid("funding.payer.provider", f"payers pay with {' or '.join(PAYER_PROVIDERS)}")
    env.limits.check(body.currency, "out", body.amount, now)
    env.limits.add(body.currency, "out", body.amount, now)
    fee = Decimal(priced["fee"])
    funding: dict[str, Any] = {"type": body.funding.type}
    if payer is not None and body.funding.type == "collection":
        funding["payer"] = {"provider": payer.provider, "msisdn": payer.msisdn}
    movement = Movement(
        kind="utility",
        direction="out",
        reference=body.reference,
        amount=body.amount,
        currency=body.currency,
        status="accepted",
        created_at=now,
        provider=item["network"],
        fee=fee,
        fee_bearer="initiator",
        payer_amount=body.amount + fee,
        recipient_amount=body.amount,
        destination={"type": "msisdn", "value": body.beneficiary.msisdn},
    )
    purchase = PurchaseRecord(
        reference=body.reference,
        product={k: item[k] for k in ("id", "category", "network", "name")},
        msisdn=body.beneficiary.msisdn,
        amount=body.amount,
        currency=body.currency,
        fee=fee,
        funding=funding,
        created_at=now,
        movement=movement,
    )
    env.resources.purchases[body.reference] = purchase
    env.add_transaction(movement)
    env.record_event("utility_purchase.accepted", now, purchase.to_wire())
    if body.funding.type == "wallet":
        if env.wallet.available[body.currency] < purchase.gross:
            env.schedule(
                now + timedelta(seconds=delay_s * 0.5),
                lambda at: transition(env, purchase, "failed", "insufficient_balance", at),
            )
        else:
            env.wallet.reserve(body.currency, purchase.gross, now, body.reference)
            purchase.reserved = purchase.gross
            _schedule_sale(env, purchase, now, delay_s)
    else:
        assert payer is not None
        env.schedule(now, lambda at: transition(env, purchase, "awaiting_payment", None, at))
        start_collection(
            env,
            reference=f"upc-{new_id()[:12]}",
            amount=purchase.gross,
            currency=body.currency,
            provider=payer.provider,
            payer={"type": "msisdn", "value": payer.msisdn},
            now=now,
            delay_s=delay_s,
            watcher=lambda c, at: _paid(env, purchase, c, at, delay_s),
            eligible=False,
        )
    outcome: Outcome = (202, purchase.to_wire())
    remember_reference(env, PURCHASE_NS, body.reference, fp, outcome)
    return outcome


def _schedule_sale(env: EnvState, purchase: PurchaseRecord, start: datetime, delay_s: float) -> None:
    for fraction, status, reason in TEST_VALUES.get(purchase.msisdn[-4:], DEFAULT_STEPS):
        env.schedule(
            start + timedelta(seconds=delay_s * fraction),
            lambda at, s=status, r=reason: transition(env, purchase, s, r, at),
        )


def _paid(
    env: EnvState, purchase: PurchaseRecord, collection: Movement, at: datetime, delay_s: float
) -> None:
    if collection.status != "settled":
        reason = "payment_expired" if collection.status == "expired" else "payment_failed"
        transition(env, purchase, "failed", reason, at)
        return
    env.wallet.reserve(purchase.currency, purchase.gross, at, purchase.reference)
    purchase.reserved = purchase.gross
    _schedule_sale(env, purchase, at, delay_s)


def transition(
    env: EnvState, purchase: PurchaseRecord, status: str, reason: str | None, at: datetime
) -> None:
    """Move a purchase to ``status``: money, limits, transaction line, event."""
    if purchase.status == status or purchase.status in FINAL:
        return
    if status in FINAL and purchase.reserved > ZERO:
        if status == "delivered" or purchase.funding["type"] == "collection":
            env.wallet.debit(purchase.currency, purchase.reserved, at, purchase.reference)
        else:
            env.wallet.release(purchase.currency, purchase.reserved, at, purchase.reference)
        purchase.reserved = ZERO
    if status in UTILITY_PURCHASE_FAILED_STATUSES:
        env.limits.remove(purchase.currency, "out", purchase.amount, purchase.created_at)
    if reason is not None:
        purchase.failure_reason = reason
    purchase.status = status
    m = purchase.movement
    m.status, m.failure_reason = status, purchase.failure_reason
    if status in FINAL:
        m.completed_at = at
        m.reconciliation_status, m.reconciliation_checked_at = "matched", at
    env.record_event("utility_purchase.status_changed", at, purchase.to_wire())


def get_purchase(env: EnvState, reference: str) -> PurchaseRecord:
    """The purchase (404 ``not_found``)."""
    purchase = env.resources.purchases.get(reference)
    if purchase is None:
        raise not_found("utility purchase")
    return purchase
