"""``GET /v1/limits``: limits with used and remaining for today and this month (Africa/Accra)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from payops.connectors.payments.models import CurrencyLimitsList

from ..auth import AuthContext, require
from ..idempotency import json_response
from ..runtime import get_sandbox
from .common import error_responses

router = APIRouter(tags=["account"])


@router.get(
    "/v1/limits", response_model=CurrencyLimitsList, responses=error_responses(), summary="Limits and usage"
)
async def get_limits(
    request: Request, ctx: Annotated[AuthContext, Depends(require("transactions.read"))]
) -> Response:
    """An empty list means no limits are set and no payment can be made."""
    now = get_sandbox(request).clock.now()
    return json_response(200, {"items": ctx.env.limits.to_wire(now)})
