"""Reconciliation through the API: check one payout run or close a day on the server's workers (they hold
the service credential), read a flow run's state and summary, and the history of checks."""

from __future__ import annotations

import asyncio
from datetime import date
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request
from payops.deployments.run_history import payout_label
from payops.store.run_summaries import RunSummaries
from pydantic import ValidationError

from ..deps import ConsoleDep
from .auth import ApiViewer
from .errors import ApiError
from .models import FlowRunOut, ReconcileRequest, StartedRun

router = APIRouter(tags=["reconciliation"])


@router.post("/reconcile", status_code=201, response_model=StartedRun)
async def reconcile(
    request: Request, console: ConsoleDep, account: ApiViewer, body: ReconcileRequest
) -> StartedRun:
    """Check one payout run against the service's ledger (``run``), or close a business day (``date``, or
    the day just ended): `payops reconcile` on the server. It only reads the service."""
    from payops.flows.reconcile import ReconcileDayParams, ReconcileRunParams, reconcile_day, reconcile_run

    if body.run and body.date:
        raise ApiError(422, "give run or date, not both")
    try:
        if body.run:
            params: Any = ReconcileRunParams(
                label=await payout_label(body.run),
                trigger=body.channel,
                unchecked_after_hours=body.unchecked_after_hours,
                credentials_block=console.settings.credentials_block or "",
            )
            flow, name = reconcile_run, f"reconcile {body.run}"
        else:
            day = date.fromisoformat(body.date) if body.date else None
            params = ReconcileDayParams(
                day=day,
                trigger=body.channel,
                unchecked_after_hours=body.unchecked_after_hours,
                credentials_block=console.settings.credentials_block or "",
            )
            flow, name = reconcile_day, f"close {day or 'the day just ended'}"
    except (ValidationError, ValueError) as exc:
        raise ApiError(422, f"not a reconciliation: {exc}") from None
    run_id = await console.launcher.start_flow(flow, {"params": params}, name)
    console.audit(request, account.name, "reconciliation.started", f"run:{run_id}", scope=name, via="api")
    return StartedRun(id=str(run_id), name=name, label=body.run)


@router.get("/flow-runs/{run_id}", response_model=FlowRunOut)
async def flow_run(run_id: UUID, console: ConsoleDep, account: ApiViewer) -> FlowRunOut:
    """Any flow run the server started: its state, and once final the summary it kept."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            found = await client.read_flow_run(run_id)
        except ObjectNotFound:
            raise ApiError(404, f"no flow run {run_id}") from None
    state = found.state
    final = bool(state and state.is_final())
    summary = await asyncio.to_thread(RunSummaries(console.engine).get, str(run_id)) if final else None
    return FlowRunOut(
        id=str(found.id),
        name=found.name,
        state=state.name if state else "Unknown",
        state_type=state.type.value if state else "UNKNOWN",
        final=final,
        paused=bool(state and state.is_paused()),
        message=(state.message or None) if state else None,
        summary=summary,
    )


@router.get("/reconciliation", response_model=list[dict[str, Any]])
async def history(
    console: ConsoleDep,
    account: ApiViewer,
    run: Annotated[str | None, Query(max_length=200)] = None,
    day: Annotated[str | None, Query(alias="date", max_length=10)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> list[dict[str, Any]]:
    """Checks of runs and daily closes, newest first, with their differences (`payops reconcile history`)."""
    from payops.store.reconciliation import ReconciliationStore

    scope, key = ("run", run) if run else (("day", day) if day else (None, None))
    checks = await asyncio.to_thread(ReconciliationStore(console.engine).checks, scope, key, limit)
    return [c.as_json() for c in checks]
