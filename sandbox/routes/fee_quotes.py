"""``GET /v1/fee-quotes/payouts`` and ``GET /v1/fee-quotes/collections`` (nothing is reserved)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from payops.connectors.payments.models import CURRENCY_PATTERN, REQUEST_AMOUNT_PATTERN, FeeQuote

from ..auth import AuthContext, require
from ..errors import invalid
from ..idempotency import json_response
from ..money import collection_fee, fmt, payout_fee, split_by_fee_bearer
from ..state import PROVIDER_CURRENCIES, PROVIDERS, EnvState
from .common import error_responses

router = APIRouter(tags=["fees"])

AmountQuery = Annotated[str, Query(pattern=REQUEST_AMOUNT_PATTERN, description="Decimal string, major units")]
CurrencyQuery = Annotated[str, Query(pattern=CURRENCY_PATTERN)]
FeeBearer = Literal["initiator", "non_initiator"]


def _quote(
    env: EnvState, amount: str, currency: str, provider: str, fee: Decimal, bearer: str
) -> dict[str, str]:
    if provider not in PROVIDERS or provider not in env.providers:
        raise invalid("provider", f"unknown provider {provider!r}")
    if currency not in PROVIDER_CURRENCIES:
        raise invalid("currency", f"currency {currency} is not supported by {provider}")
    value = Decimal(amount)
    if value <= 0:
        raise invalid("amount", "must be positive")
    payer, recipient = split_by_fee_bearer(value, fee, bearer)
    if recipient <= 0:
        raise invalid("amount", "fee cannot be priced: the amount does not cover the fee")
    return {
        "amount": fmt(value),
        "currency": currency,
        "provider": provider,
        "fee": fmt(fee),
        "feeBearer": bearer,
        "payerAmount": fmt(payer),
        "recipientAmount": fmt(recipient),
    }


@router.get(
    "/v1/fee-quotes/payouts", response_model=FeeQuote, responses=error_responses(), summary="Payout fee"
)
async def quote_payout(
    ctx: Annotated[AuthContext, Depends(require("disbursements.read"))],
    amount: AmountQuery,
    currency: CurrencyQuery,
    provider: Annotated[str, Query(min_length=1, max_length=64)],
    destination_type: Annotated[
        Literal["msisdn", "account", "card"], Query(alias="destinationType")
    ] = "msisdn",
    fee_bearer: Annotated[FeeBearer, Query(alias="feeBearer")] = "initiator",
) -> Response:
    """Fee ``max(0.50, 1%)`` capped at 20.00; initiator pays amount+fee, non_initiator's fee comes off."""
    meta = PROVIDERS.get(provider)
    if meta is not None and meta["destination"] != destination_type:
        raise invalid("destinationType", f"provider {provider} pays to {meta['destination']}")
    fee = payout_fee(Decimal(amount))
    return json_response(200, _quote(ctx.env, amount, currency, provider, fee, fee_bearer))


@router.get(
    "/v1/fee-quotes/collections",
    response_model=FeeQuote,
    responses=error_responses(),
    summary="Collection fee",
)
async def quote_collection(
    ctx: Annotated[AuthContext, Depends(require("collections.read"))],
    amount: AmountQuery,
    currency: CurrencyQuery,
    provider: Annotated[str, Query(min_length=1, max_length=64)],
    fee_bearer: Annotated[FeeBearer, Query(alias="feeBearer")] = "non_initiator",
) -> Response:
    """Fee ``max(0.10, 1.5%)``, no cap; default bearer non_initiator (the payer's amount is the amount)."""
    fee = collection_fee(Decimal(amount))
    return json_response(200, _quote(ctx.env, amount, currency, provider, fee, fee_bearer))
