"""Settlement policy (GET/PUT/DELETE) and settlement runs (settle now, list, latest, get, resettle)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from payops.connectors.payments.models import (
    ResettlementRequest,
    SettlementPage,
    SettlementPolicy,
    SettlementPolicyRequest,
    SettlementRequest,
    SettlementRun,
)

from ..auth import AuthContext, require
from ..engine.settlements import check_policy, delete_policy, find_run, install_policy, resettle, settle_now
from ..errors import not_found
from ..idempotency import IdempotencyKey, json_response, run_idempotent
from ..references import fingerprint
from ..runtime import get_sandbox
from .common import decode_cursor, encode_cursor, error_responses

router = APIRouter(tags=["settlements"])


@router.get(
    "/v1/settlement-policy",
    response_model=SettlementPolicy,
    responses=error_responses(404),
    summary="Where and when settlements are paid",
)
async def get_policy(ctx: Annotated[AuthContext, Depends(require("settlements.read"))]) -> Response:
    """404 when settlement is turned off."""
    if ctx.env.settlement_policy is None:
        raise not_found("settlement policy")
    return json_response(200, ctx.env.settlement_policy)


@router.put(
    "/v1/settlement-policy",
    response_model=SettlementPolicy,
    responses=error_responses(422),
    summary="Set where and when settlements are paid",
)
async def put_policy(
    request: Request,
    body: SettlementPolicyRequest,
    ctx: Annotated[AuthContext, Depends(require("settlements.write"))],
) -> Response:
    """Destinations are verified with the provider first; a refusal changes nothing."""
    sandbox = get_sandbox(request)
    with sandbox.state.lock:
        check_policy(ctx.env, body)
        policy = install_policy(ctx.env, body, sandbox.clock.now())
    return json_response(200, policy)


@router.delete(
    "/v1/settlement-policy",
    status_code=204,
    responses=error_responses(),
    summary="Turn settlement off",
    response_class=Response,
)
async def remove_policy(
    request: Request, ctx: Annotated[AuthContext, Depends(require("settlements.write"))]
) -> Response:
    """Scheduled runs stop; settle-now answers 422 ``policy_not_nettable`` until a policy is saved."""
    with get_sandbox(request).state.lock:
        delete_policy(ctx.env)
    return Response(status_code=204)


@router.post(
    "/v1/settlements",
    status_code=202,
    response_model=SettlementRun,
    responses=error_responses(409, 422),
    summary="Settle now",
)
async def create_settlement(
    request: Request,
    body: SettlementRequest,
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("settlements.write"))],
) -> Response:
    """Start a run paying the available balance above ``minimumBalance``."""
    sandbox = get_sandbox(request)
    fp = fingerprint(body.to_wire())
    return await run_idempotent(
        request,
        ctx,
        idempotency_key,
        lambda: settle_now(ctx.env, body.reference, body.currency, fp, sandbox.clock.now()),
    )


@router.get(
    "/v1/settlements",
    response_model=SettlementPage,
    responses=error_responses(),
    summary="Settlement runs",
)
async def list_settlements(
    ctx: Annotated[AuthContext, Depends(require("settlements.read"))],
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
    cursor: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> Response:
    """Newest first; ``nextCursor`` absent on the last page."""
    runs = ctx.env.settlement_runs
    end = len(runs) if cursor is None else min(decode_cursor(cursor) - 1, len(runs))
    start = max(0, end - limit)
    chunk = list(reversed(runs[start:end]))
    page: dict[str, object] = {"items": [r.to_wire() for r in chunk]}
    if start > 0 and chunk:
        page["nextCursor"] = encode_cursor(chunk[-1].seq)
    return json_response(200, page)


@router.get(
    "/v1/settlements/latest",
    response_model=SettlementRun,
    responses=error_responses(404),
    summary="The latest settlement run",
)
async def latest_settlement(ctx: Annotated[AuthContext, Depends(require("settlements.read"))]) -> Response:
    """404 when no run exists yet."""
    if not ctx.env.settlement_runs:
        raise not_found("settlement run")
    return json_response(200, ctx.env.settlement_runs[-1].to_wire())


@router.get(
    "/v1/settlements/{id}",
    response_model=SettlementRun,
    responses=error_responses(404),
    summary="Get a settlement run",
)
async def get_settlement(
    id: uuid.UUID, ctx: Annotated[AuthContext, Depends(require("settlements.read"))]
) -> Response:
    """The run as it stands."""
    return json_response(200, find_run(ctx.env, str(id)).to_wire())


@router.post(
    "/v1/settlements/{id}/resettlements",
    status_code=202,
    response_model=SettlementRun,
    responses=error_responses(404, 409, 422),
    summary="Retry a failed settlement run",
)
async def create_resettlement(
    request: Request,
    id: uuid.UUID,
    body: ResettlementRequest,
    idempotency_key: IdempotencyKey,
    ctx: Annotated[AuthContext, Depends(require("settlements.write"))],
) -> Response:
    """202 new run for a failed_partial/failed_all run not retried before; 409/422 per the run table."""
    sandbox = get_sandbox(request)
    fp = fingerprint(str(id), body.to_wire())
    return await run_idempotent(
        request,
        ctx,
        idempotency_key,
        lambda: resettle(ctx.env, str(id), body.reference, fp, sandbox.clock.now()),
    )
