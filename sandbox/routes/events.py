"""``GET /v1/events``: catch-up feed of webhook events."""

from __future__ import annotations

from typing import Annotated

import jwt
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials
from payops.connectors.payments.models import EventPage

from ..auth import AuthContext, authenticate, bearer
from ..engine.events import feed_page
from ..idempotency import json_response
from ..runtime import get_sandbox
from .common import error_responses

router = APIRouter(tags=["events"])

FEED_PERMISSIONS = (
    "collections.read",
    "disbursements.read",
    "settlements.read",
    "wallettransfer.read",
)


async def require_any_feed_permission(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> AuthContext:
    """Authenticate like every route (one rate-limit token); the credential needs at least one permission
    that shows events, else 403 ``forbidden``."""
    token = credentials.credentials if credentials else None
    permission = FEED_PERMISSIONS[0]
    if token:
        try:
            claimed = jwt.decode(token, options={"verify_signature": False}).get("perms") or []
        except jwt.PyJWTError:
            claimed = []  # authenticate() answers 401 below
        permission = next((p for p in FEED_PERMISSIONS if p in claimed), permission)
    return authenticate(get_sandbox(request), request, token, permission)


@router.get(
    "/v1/events",
    response_model=EventPage,
    responses=error_responses(),
    summary="Catch-up feed of events",
    response_model_exclude_none=True,
)
async def list_events(
    request: Request,
    ctx: Annotated[AuthContext, Depends(require_any_feed_permission)],
    after: Annotated[
        str | None, Query(min_length=1, max_length=100, description="Id of the last processed event")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
) -> Response:
    """Events in the order received; ``nextAfter`` while more follow (absent at the end)."""
    sandbox = get_sandbox(request)
    with sandbox.state.lock:
        page = feed_page(
            ctx.env, ctx.permissions, after, limit, sandbox.clock.now(), sandbox.config.events_lag_s
        )
    return json_response(200, page)
