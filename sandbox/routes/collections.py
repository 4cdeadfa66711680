"""``POST /v1/collections`` and ``GET /v1/collections/{reference}``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from payops.connectors.payments.models import Collection, CollectionRequest

from ..auth import AuthContext, require
from ..engine.collections import accept_collection, check_request
from ..errors import not_found
from ..idempotency import IdempotencyKey, json_response, run_idempotent
from ..runtime import get_sandbox
from .common import ReferencePath, error_responses

router = APIRouter(tags=["collections"])


@router.post(
    "/v1/collections",
    status_code=202,
    response_model=Collection,
    responses=error_responses(404, 409),
    summary="Ask a payer to approve a payment",
)
async def create_collection(
    request: Request,
    body: CollectionRequest,
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("collections.write"))],
) -> Response:
    """202 with the Collection record (accepted, not settled)."""
    sandbox = get_sandbox(request)
    check_request(ctx.env, body)
    return await run_idempotent(
        request,
        ctx,
        idempotency_key,
        lambda: accept_collection(ctx.env, body, sandbox.clock.now(), sandbox.config.delivery_delay_s),
    )


@router.get(
    "/v1/collections/{reference}",
    response_model=Collection,
    responses=error_responses(404),
    summary="Get a collection",
)
async def get_collection(
    request: Request,
    reference: ReferencePath,
    ctx: Annotated[AuthContext, Depends(require("collections.read"))],
) -> Response:
    """The collection as it stands now."""
    with get_sandbox(request).state.lock:
        collection = ctx.env.resources.collections.get(reference)
        if collection is None:
            raise not_found("collection")
        return json_response(200, collection.to_wire())
