"""``GET /v1/wallet``: balances (available) and reserved amounts per currency."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from payops.connectors.payments.models import WalletAccountList

from ..auth import AuthContext, require
from ..idempotency import json_response
from .common import error_responses

router = APIRouter(tags=["account"])


@router.get(
    "/v1/wallet", response_model=WalletAccountList, responses=error_responses(), summary="Wallet balances"
)
async def get_wallet(ctx: Annotated[AuthContext, Depends(require("transactions.read"))]) -> Response:
    """One wallet account: ``balances`` is what can be spent, ``reserved`` what requests in progress hold."""
    return json_response(200, {"items": [ctx.env.wallet.to_wire()]})
