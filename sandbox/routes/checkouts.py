"""Hosted checkouts: ``POST/GET /v1/checkouts``, ``GET /v1/checkouts/{checkoutId}``, cancel."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import Response
from payops.connectors.payments.models import CheckoutCancel, CheckoutCreate, CheckoutPage, HostedCheckout

from ..auth import AuthContext, require
from ..engine.checkouts import cancel_checkout, check_create, create_checkout, get_checkout, list_checkouts
from ..errors import ApiError
from ..idempotency import IdempotencyKey, json_response, run_idempotent
from ..runtime import Sandbox, get_sandbox
from .common import decode_cursor, encode_cursor, error_responses

router = APIRouter(tags=["checkouts"])


def ensure_configured(sandbox: Sandbox) -> None:
    """503 ``checkout_unavailable`` while hosted checkout is not configured on the deployment."""
    if not sandbox.config.checkout_configured:
        raise ApiError(503, "checkout_unavailable", "hosted checkout is not configured on this deployment")


@router.post(
    "/v1/checkouts",
    status_code=201,
    response_model=HostedCheckout,
    responses=error_responses(409),
    summary="Create a hosted checkout",
)
async def create(
    request: Request,
    body: CheckoutCreate,
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("collections.write"))],
) -> Response:
    """201 with the checkout; its ``url`` opens the payer page."""
    sandbox = get_sandbox(request)
    ensure_configured(sandbox)
    now = sandbox.clock.now()
    check_create(body, now)
    base = str(request.base_url)
    return await run_idempotent(
        request, ctx, idempotency_key, lambda: create_checkout(ctx.env, body, now, base)
    )


@router.get(
    "/v1/checkouts", response_model=CheckoutPage, responses=error_responses(), summary="List checkouts"
)
async def list_(
    request: Request,
    ctx: Annotated[AuthContext, Depends(require("collections.read"))],
    status: Literal["open", "paid", "expired", "cancelled"] | None = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """Newest first; ``nextCursor`` is an empty string on the last page."""
    sandbox = get_sandbox(request)
    ensure_configured(sandbox)
    before = decode_cursor(cursor) if cursor else None
    with sandbox.state.lock:
        page, next_seq = list_checkouts(ctx.env, status, limit, before)
        items = [c.to_wire() for c in page]
    return json_response(200, {"items": items, "nextCursor": encode_cursor(next_seq) if next_seq else ""})


@router.get(
    "/v1/checkouts/{checkoutId}",
    response_model=HostedCheckout,
    responses=error_responses(404),
    summary="Get a hosted checkout with its attempts",
)
async def read(
    request: Request,
    checkoutId: uuid.UUID,  # noqa: N803 - the spec's parameter name
    ctx: Annotated[AuthContext, Depends(require("collections.read"))],
) -> Response:
    """The checkout with ``attempts`` (payer numbers masked); another business's checkout is 404."""
    sandbox = get_sandbox(request)
    ensure_configured(sandbox)
    with sandbox.state.lock:
        return json_response(200, get_checkout(ctx.env, str(checkoutId)).to_wire(with_attempts=True))


@router.post(
    "/v1/checkouts/{checkoutId}/cancel",
    response_model=HostedCheckout,
    responses=error_responses(404, 409),
    summary="Cancel a hosted checkout",
)
async def cancel(
    request: Request,
    checkoutId: uuid.UUID,  # noqa: N803
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("collections.write"))],
    body: Annotated[CheckoutCancel | None, Body()] = None,
) -> Response:
    """Open → cancelled (cancelling again answers the same); paid or expired → 409 ``checkout_not_open``."""
    sandbox = get_sandbox(request)
    ensure_configured(sandbox)
    return await run_idempotent(
        request, ctx, idempotency_key, lambda: cancel_checkout(ctx.env, str(checkoutId))
    )
