"""``GET /v1/party-lookups``: the holder name behind a mobile money number."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from payops.connectors.payments.models import PartyLookup

from ..auth import AuthContext, require
from ..engine.party_lookups import lookup
from ..idempotency import json_response
from .common import error_responses

router = APIRouter(tags=["reference data"])


@router.get(
    "/v1/party-lookups",
    response_model=PartyLookup,
    responses=error_responses(404),
    summary="Look up the name on a mobile money number",
)
async def party_lookup(
    ctx: Annotated[AuthContext, Depends(require("disbursements.read"))],
    provider: Annotated[str, Query(min_length=1, max_length=64)],
    msisdn: Annotated[
        str, Query(pattern=r"^[0-9]{9,15}$", description="International format without the plus")
    ],
) -> Response:
    """``{provider, msisdn, name}``; test values: msisdn ending 0404 → 404, 0502 → 502, 0504 → 504."""
    return json_response(200, lookup(ctx.env.providers, provider, msisdn))
