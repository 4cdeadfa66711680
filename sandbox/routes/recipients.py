"""``GET /v1/recipients/{handle}``: who a handle belongs to."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import Response
from payops.connectors.payments.models import MAX_HANDLE_LENGTH, Recipient

from ..auth import AuthContext, require
from ..engine.transfers import recipient_of
from ..idempotency import json_response
from .common import error_responses

router = APIRouter(tags=["transfers"])


@router.get(
    "/v1/recipients/{handle}",
    response_model=Recipient,
    responses=error_responses(404),
    summary="Check who a handle belongs to",
)
async def get_recipient(
    handle: Annotated[str, Path(min_length=1, max_length=MAX_HANDLE_LENGTH)],
    ctx: Annotated[AuthContext, Depends(require("wallettransfer.read"))],
) -> Response:
    """``{handle, name}`` of the business (404 when no business has the handle in this environment)."""
    business = recipient_of(ctx.env, handle)
    return json_response(200, {"handle": business.handle, "name": business.name})
