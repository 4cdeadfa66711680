"""``POST {auth_url}/v1/oauth/token``: client credentials → JWT."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from payops.connectors.payments.models import TokenResponse

from ..auth import token_for
from ..errors import ApiError, invalid
from ..idempotency import json_response
from ..runtime import RESOURCE, get_sandbox
from .common import error_responses

router = APIRouter(tags=["auth"])


@router.post(
    "/auth/v1/oauth/token",
    response_model=TokenResponse,
    responses=error_responses(),
    summary="Exchange a client credential for an access token",
)
async def issue_token(
    request: Request,
    grant_type: Annotated[str, Form(description="client_credentials")],
    client_id: Annotated[str, Form()],
    client_secret: Annotated[str, Form()],
    resource: Annotated[str, Form(description=RESOURCE)],
) -> Response:
    """OAuth 2.0 client credentials; 401 for an unknown client or wrong secret, 403 when suspended."""
    sandbox = get_sandbox(request)
    if grant_type != "client_credentials":
        raise invalid("grant_type", "only client_credentials is supported")
    if resource != RESOURCE:
        raise invalid("resource", f"unknown resource; use {RESOURCE}")
    credential = sandbox.state.credentials.get(client_id)
    if credential is None or not hmac.compare_digest(
        credential.client_secret.encode(), client_secret.encode()
    ):
        raise ApiError(401, "unauthenticated", "unknown client or wrong secret")
    business = sandbox.state.businesses[credential.business_id]
    if business.status == "suspended":
        raise ApiError(403, "business_suspended", "business is suspended: credentials stop working")
    token, expires_in = token_for(sandbox, credential)
    return json_response(
        200,
        {"access_token": token, "token_type": "Bearer", "expires_in": expires_in},
        headers={"Cache-Control": "no-store"},
    )
