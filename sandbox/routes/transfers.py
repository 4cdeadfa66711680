"""``POST /v1/transfers``, ``GET /v1/transfers/{reference}``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from payops.connectors.payments.models import Transfer, TransferRequest

from ..auth import AuthContext, require
from ..engine.transfers import send_transfer
from ..errors import not_found
from ..idempotency import IdempotencyKey, json_response, run_idempotent
from ..runtime import get_sandbox
from .common import ReferencePath, error_responses

router = APIRouter(tags=["transfers"])


@router.post(
    "/v1/transfers",
    response_model=Transfer,
    responses=error_responses(404, 409),
    summary="Send money to another business's wallet (hold and confirm in one request)",
)
async def create_transfer(
    request: Request,
    body: TransferRequest,
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("wallettransfer.write"))],
) -> Response:
    """200 with the Transfer (``completed`` means the money moved); 400 transfer_refused, 409 reference_reused
    or transfer_not_held. A retry with the same key and body replays the answer and never sends twice."""
    sandbox = get_sandbox(request)
    return await run_idempotent(
        request, ctx, idempotency_key, lambda: send_transfer(ctx.env, body, sandbox.clock.now())
    )


@router.get(
    "/v1/transfers/{reference}",
    response_model=Transfer,
    responses=error_responses(404),
    summary="Get a transfer",
)
async def get_transfer(
    request: Request,
    reference: ReferencePath,
    ctx: Annotated[AuthContext, Depends(require("wallettransfer.read"))],
) -> Response:
    """A transfer this business sent."""
    with get_sandbox(request).state.lock:
        record = ctx.env.resources.transfers.get(reference)
        if record is None:
            raise not_found("transfer")
        return json_response(200, record.to_wire())
