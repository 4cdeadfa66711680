"""``POST /v1/payout-batches``: up to 100 payouts, each accepted or refused on its own."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from payops.connectors.payments.models import PayoutBatchRequest, PayoutBatchResult

from ..auth import AuthContext, require
from ..engine.payouts import accept_batch, check_item
from ..idempotency import IdempotencyKey, run_idempotent
from ..runtime import get_sandbox
from .common import error_responses

router = APIRouter(tags=["payouts"])


@router.post(
    "/v1/payout-batches",
    status_code=200,
    response_model=PayoutBatchResult,
    responses=error_responses(409),
    summary="Send up to 100 payouts in one request",
)
async def create_batch(
    request: Request,
    body: PayoutBatchRequest,
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("disbursements.write"))],
) -> Response:
    """Rule 3: a malformed batch (size, invalid item, repeated reference) is refused whole with 400."""
    sandbox = get_sandbox(request)
    for i, item in enumerate(body.items):
        check_item(ctx.env, item, prefix=f"items[{i}].")
    return await run_idempotent(
        request,
        ctx,
        idempotency_key,
        lambda: accept_batch(ctx.env, body, sandbox.clock.now(), sandbox.config.delivery_delay_s),
    )
