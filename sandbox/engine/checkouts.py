"""Hosted checkouts: creation rules, listing, cancel, clock expiry, and payments from the payer page.

A payment is a collection (same fees and payer test values). A single checkout becomes ``paid`` when
its collection settles; a reusable one stays ``open`` and counts ``paymentsCount`` and
``totalCollected`` (settled payments only).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from payops.connectors.payments.models import CheckoutCreate

from ..errors import ApiError, invalid, not_found
from ..money import collection_fee, q
from ..records import Movement, new_id
from ..references import Outcome, claim_reference, fingerprint, remember_reference
from ..resources import CheckoutAttemptRecord, CheckoutRecord, new_checkout_token
from ..state import PROVIDER_CURRENCIES, PROVIDERS, EnvState
from .collections import start_collection
from .payouts import DESTINATION_PATTERNS

CHECKOUT_NS = "checkout"
PAYER_PROVIDERS = tuple(p for p, meta in PROVIDERS.items() if meta["type"] == "mobile_money")


def _check_url(field: str, url: str | None) -> None:
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc or len(url) > 2048:
        raise invalid(field, "must be an absolute http(s) URL")


def check_create(body: CheckoutCreate, now: datetime) -> None:
    """400 ``invalid_input`` for what the wire model cannot know."""
    if body.currency not in PROVIDER_CURRENCIES:
        raise invalid("currency", f"currency {body.currency} is not supported")
    _check_url("successUrl", body.success_url)
    _check_url("cancelUrl", body.cancel_url)
    if body.expires_at is not None:
        if body.expires_at.tzinfo is None:
            raise invalid("expiresAt", "must carry a time zone")
        if body.expires_at <= now:
            raise invalid("expiresAt", "must be in the future")
    for i, amount in enumerate(body.suggested_amounts or []):
        if body.amount_type == "fixed":
            raise invalid("suggestedAmounts", "apply only to amountType open")
        if (body.min_amount is not None and amount < body.min_amount) or (
            body.max_amount is not None and amount > body.max_amount
        ):
            raise invalid(f"suggestedAmounts[{i}]", "outside minAmount..maxAmount")
    if len(body.suggested_amounts or []) > 10:
        raise invalid("suggestedAmounts", "at most 10")
    smallest = body.amount if body.amount is not None else body.min_amount
    if smallest is not None and smallest <= collection_fee(smallest):
        raise invalid(
            "amount" if body.amount is not None else "minAmount", "does not cover the collection fee"
        )


def create_checkout(env: EnvState, body: CheckoutCreate, now: datetime, base_url: str) -> Outcome:
    """``POST /v1/checkouts``: 201 with the record (same reference + request replays; else 409)."""
    fp = fingerprint(body.to_wire())
    replay = claim_reference(env, CHECKOUT_NS, body.reference, fp)
    if replay is not None:
        return replay
    ext = env.resources
    token = new_checkout_token()
    checkout = CheckoutRecord(
        id=str(uuid.uuid4()),
        reference=body.reference,
        token=token,
        url=f"{base_url.rstrip('/')}/pay/{token}",
        environment=env.environment,
        currency=body.currency,
        amount_type=body.amount_type,
        usage=body.usage,
        created_at=now,
        amount=body.amount,
        min_amount=body.min_amount,
        max_amount=body.max_amount,
        suggested_amounts=list(body.suggested_amounts or []),
        description=body.description,
        success_url=body.success_url,
        cancel_url=body.cancel_url,
        expires_at=body.expires_at,
        seq=len(ext.checkouts) + 1,
    )
    ext.checkouts[checkout.id] = checkout
    if checkout.expires_at is not None:
        env.schedule(checkout.expires_at, lambda at: _expire(checkout))
    outcome: Outcome = (201, checkout.to_wire())
    remember_reference(env, CHECKOUT_NS, body.reference, fp, outcome)
    return outcome


def _expire(checkout: CheckoutRecord) -> None:
    if checkout.status == "open":
        checkout.status = "expired"


def get_checkout(env: EnvState, checkout_id: str) -> CheckoutRecord:
    """The checkout of this business environment (404 otherwise, including another business's)."""
    checkout = env.resources.checkouts.get(checkout_id.lower())
    if checkout is None:
        raise not_found("checkout")
    return checkout


def cancel_checkout(env: EnvState, checkout_id: str) -> Outcome:
    """``POST /v1/checkouts/{id}/cancel``: open → cancelled (idempotent); paid/expired → 409."""
    checkout = get_checkout(env, checkout_id)
    if checkout.status not in {"open", "cancelled"}:
        raise ApiError(409, "checkout_not_open", f"checkout is {checkout.status} and cannot be cancelled")
    checkout.status = "cancelled"
    return 200, checkout.to_wire()


def list_checkouts(
    env: EnvState, status: str | None, limit: int, before_seq: int | None
) -> tuple[list[Any], int]:
    """Newest first after ``before_seq``; returns the page and the seq to continue from (0 at the end)."""
    items = [
        c
        for c in reversed(env.resources.checkouts.values())
        if (before_seq is None or c.seq < before_seq) and (status is None or c.status == status)
    ]
    page = items[:limit]
    return page, (page[-1].seq if len(items) > limit else 0)


def find_by_token(envs: list[EnvState], token: str) -> tuple[EnvState, CheckoutRecord] | None:
    """The checkout whose public URL carries ``token``."""
    for env in envs:
        for checkout in env.resources.checkouts.values():
            if checkout.token == token:
                return env, checkout
    return None


def mask(msisdn: str) -> str:
    """``233241234567`` → ``233******567``."""
    return msisdn[:3] + "*" * max(0, len(msisdn) - 6) + msisdn[-3:]


def pay(
    env: EnvState,
    checkout: CheckoutRecord,
    provider: str,
    msisdn: str,
    amount_text: str | None,
    now: datetime,
    delay_s: float,
) -> CheckoutAttemptRecord:
    """A payer pays: validation (``ApiError`` with a message for the page), then a collection is started."""
    if checkout.status != "open":
        raise ApiError(409, "checkout_not_open", f"this payment link is {checkout.status}")
    if checkout.usage == "single" and any(a.status in {"pending", "succeeded"} for a in checkout.attempts):
        raise ApiError(409, "payment_in_progress", "a payment of this link is already in progress")
    if provider not in PAYER_PROVIDERS or provider not in env.providers:
        raise invalid("provider", "choose a mobile money provider")
    msisdn = msisdn.strip().lstrip("+")
    if not DESTINATION_PATTERNS["msisdn"].fullmatch(msisdn):
        raise invalid("msisdn", "enter the mobile money number in international format (233...)")
    amount = checkout.amount if checkout.amount_type == "fixed" else _open_amount(checkout, amount_text)
    assert amount is not None
    env.limits.check(checkout.currency, "in", amount, now)
    env.limits.add(checkout.currency, "in", amount, now)
    reference = f"chk-{new_id()[:12]}"
    attempt = CheckoutAttemptRecord(
        collection_reference=reference, provider=provider, payer=mask(msisdn), amount=amount, created_at=now
    )
    checkout.attempts.append(attempt)
    start_collection(
        env,
        reference=reference,
        amount=amount,
        currency=checkout.currency,
        provider=provider,
        payer={"type": "msisdn", "value": msisdn},
        now=now,
        delay_s=delay_s,
        note=f"checkout {checkout.reference}"[:50],
        fee=collection_fee(amount),
        watcher=lambda c, at: _settle_attempt(checkout, attempt, c, at),
    )
    return attempt


def _open_amount(checkout: CheckoutRecord, text: str | None) -> Decimal:
    try:
        amount = q(Decimal((text or "").strip()))
    except ArithmeticError:
        raise invalid("amount", "enter an amount like 12.50") from None
    if not amount.is_finite() or amount <= 0:
        raise invalid("amount", "enter a positive amount")
    if checkout.min_amount is not None and amount < checkout.min_amount:
        raise invalid("amount", f"at least {checkout.min_amount}")
    if checkout.max_amount is not None and amount > checkout.max_amount:
        raise invalid("amount", f"at most {checkout.max_amount}")
    if amount <= collection_fee(amount):
        raise invalid("amount", "too small to cover the fee")
    return amount


def _settle_attempt(
    checkout: CheckoutRecord, attempt: CheckoutAttemptRecord, collection: Movement, at: datetime
) -> None:
    if collection.status != "settled":
        attempt.status = "failed"
        attempt.failure_reason = collection.failure_reason or collection.status
        return
    attempt.status = "succeeded"
    checkout.payments_count += 1
    checkout.total_collected += collection.amount
    if checkout.usage == "single":
        checkout.status, checkout.paid_at, checkout.collection_reference = "paid", at, collection.reference
