"""``POST /v1/payouts`` and ``GET /v1/payouts/{reference}``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from payops.connectors.payments.models import Payout, PayoutRequest

from ..auth import AuthContext, require
from ..engine.payouts import accept_payout, check_item
from ..errors import not_found
from ..idempotency import IdempotencyKey, json_response, run_idempotent
from ..runtime import get_sandbox
from .common import ReferencePath, error_responses

router = APIRouter(tags=["payouts"])


@router.post(
    "/v1/payouts",
    status_code=202,
    response_model=Payout,
    responses=error_responses(409),
    summary="Send money from the wallet",
)
async def create_payout(
    request: Request,
    body: PayoutRequest,
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("disbursements.write"))],
) -> Response:
    """202 with the Payout record (accepted, not delivered); refusals as a single payout gets them."""
    sandbox = get_sandbox(request)
    check_item(ctx.env, body)
    return await run_idempotent(
        request,
        ctx,
        idempotency_key,
        lambda: accept_payout(ctx.env, body, sandbox.clock.now(), sandbox.config.delivery_delay_s),
    )


@router.get(
    "/v1/payouts/{reference}", response_model=Payout, responses=error_responses(404), summary="Get a payout"
)
async def get_payout(
    reference: ReferencePath,
    ctx: Annotated[AuthContext, Depends(require("disbursements.read"))],
) -> Response:
    """The payout as it stands now."""
    payout = ctx.env.payouts.get(reference)
    if payout is None:
        raise not_found("payout")
    return json_response(200, payout.to_wire())
