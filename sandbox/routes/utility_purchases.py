"""Utilities: product list, fee quote, purchases (``/v1/utility-products``, ``/v1/fee-quotes/utilities``,
``/v1/utility-purchases``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from payops.connectors.payments.models import (
    CURRENCY_PATTERN,
    REQUEST_AMOUNT_PATTERN,
    UtilityFeeQuote,
    UtilityProductList,
    UtilityPurchase,
    UtilityPurchaseRequest,
)

from ..auth import AuthContext, require
from ..engine.utility_purchases import PRODUCTS, accept_purchase, get_purchase, quote
from ..errors import invalid
from ..idempotency import IdempotencyKey, json_response, run_idempotent
from ..runtime import get_sandbox
from .common import ReferencePath, error_responses

router = APIRouter(tags=["utilities"])


@router.get(
    "/v1/utility-products",
    response_model=UtilityProductList,
    responses=error_responses(),
    summary="Airtime and data products",
)
async def list_products(ctx: Annotated[AuthContext, Depends(require("disbursements.read"))]) -> Response:
    """Every product on sale now."""
    return json_response(200, {"items": PRODUCTS})


@router.get(
    "/v1/fee-quotes/utilities",
    response_model=UtilityFeeQuote,
    responses=error_responses(404, 422),
    summary="Fee of a utility purchase",
)
async def quote_utility(
    ctx: Annotated[AuthContext, Depends(require("disbursements.write"))],
    product_id: Annotated[str, Query(alias="productId", min_length=1, max_length=64)],
    amount: Annotated[str, Query(pattern=REQUEST_AMOUNT_PATTERN)],
    currency: Annotated[str, Query(pattern=CURRENCY_PATTERN)],
) -> Response:
    """Nothing is reserved; the fee is worked out again at purchase."""
    value = Decimal(amount)
    if value <= 0:
        raise invalid("amount", "must be positive")
    return json_response(200, quote(product_id, value, currency))


@router.post(
    "/v1/utility-purchases",
    status_code=202,
    response_model=UtilityPurchase,
    responses=error_responses(404, 409, 422),
    summary="Buy airtime or data",
)
async def create_purchase(
    request: Request,
    body: UtilityPurchaseRequest,
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("disbursements.write"))],
) -> Response:
    """202 with the purchase (accepted, not delivered)."""
    sandbox = get_sandbox(request)
    return await run_idempotent(
        request,
        ctx,
        idempotency_key,
        lambda: accept_purchase(ctx.env, body, sandbox.clock.now(), sandbox.config.delivery_delay_s),
    )


@router.get(
    "/v1/utility-purchases/{reference}",
    response_model=UtilityPurchase,
    responses=error_responses(404),
    summary="Get a utility purchase",
)
async def read_purchase(
    request: Request,
    reference: ReferencePath,
    ctx: Annotated[AuthContext, Depends(require("disbursements.read"))],
) -> Response:
    """The purchase as it stands."""
    with get_sandbox(request).state.lock:
        return json_response(200, get_purchase(ctx.env, reference).to_wire())
