"""``GET /v1/payment-methods``: providers usable by the account."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from payops.connectors.payments.models import PaymentMethodList

from ..auth import AuthContext, require
from ..idempotency import json_response
from ..state import PROVIDER_CURRENCIES, PROVIDERS
from .common import error_responses

router = APIRouter(tags=["account"])


@router.get(
    "/v1/payment-methods",
    response_model=PaymentMethodList,
    responses=error_responses(),
    summary="Providers usable by the account",
)
async def list_payment_methods(
    ctx: Annotated[AuthContext, Depends(require("transactions.read"))],
) -> Response:
    """Every provider enabled for this business and environment."""
    items = [
        {
            "provider": p,
            "name": meta["name"],
            "type": meta["type"],
            "currencies": list(PROVIDER_CURRENCIES),
            "collections": True,
            "payouts": True,
        }
        for p, meta in PROVIDERS.items()
        if p in ctx.env.providers
    ]
    return json_response(200, {"items": items})
