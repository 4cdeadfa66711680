"""Payout runs through the API: start one from an uploaded sheet, retry a run's failed rows, list runs, read
one (state, the approval it waits for, its summary once final, its reports), decide an approval."""

from __future__ import annotations

import asyncio
from datetime import UTC
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi.responses import Response
from payops.deployments.approving import DecisionError, pending
from payops.deployments.run_history import RunRecord, find_payout_runs, recent_payout_runs
from payops.flows.payouts import PayoutRunParams
from payops.store.retries import RetryRows
from payops.store.run_summaries import RunSummaries
from payops.tasks.approval.approvals import ApprovalKeyMissing, Start
from payops.tasks.payouts.paid_before import earlier_runs
from payops.tasks.payouts.retry_sheet import RetryRefused, prepare_retry
from pydantic import ValidationError

from ..deps import ConsoleDep, size_within_limit
from ..launching import launch_payout_run
from ..routes.runs import report_response
from ..runs import read_run
from ..state import Console
from ..storage import StorageError
from .auth import ApiApprover, ApiOperator, ApiViewer
from .errors import ApiError
from .models import (
    ApprovalWait,
    DecisionRequest,
    FailsAgainRow,
    RetryRequest,
    RunOptions,
    RunOut,
    RunRecordOut,
    Said,
    StartedRun,
)

router = APIRouter(tags=["runs"])


def _params(console: Console, options: RunOptions, **where: Any) -> PayoutRunParams:
    """The run's parameters: the caller's options, the server's credential; a bad option is one line."""
    fields = options.model_dump(exclude={"channel"})
    try:
        return PayoutRunParams(credentials_block=console.settings.credentials_block, **fields, **where)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ApiError(422, problems) from None


async def _require_key(console: Console) -> None:
    if await console.approval_key() is None:
        raise ApiError(503, "the payops server has no approval signing key; nothing was started")


async def _read_sheet(file: UploadFile, limit: int) -> bytes:
    data = bytearray()
    while chunk := await file.read(256 * 1024):
        data += chunk
        if len(data) > limit:
            mb = limit // (1024 * 1024)
            raise ApiError(413, f"the sheet is larger than {mb} MB (the server's PAYOPS_MAX_UPLOAD_MB)")
    return bytes(data)


@router.post("/runs", status_code=201, response_model=StartedRun, dependencies=[Depends(size_within_limit)])
async def start_run(
    request: Request,
    console: ConsoleDep,
    account: ApiOperator,
    sheet: Annotated[UploadFile, File(description="The payout sheet (.xlsx, .xlsm or .csv)")],
    options: Annotated[str, Form(description="RunOptions as JSON")] = "{}",
) -> StartedRun:
    """Pay an uploaded sheet: the flow reads, validates, pre-flights, asks the approvers the policy names,
    sends and reports, as `payops payouts` does; its reports stay on the server."""
    try:
        chosen = RunOptions.model_validate_json(options or "{}")
    except ValidationError as exc:
        raise ApiError(422, "options: " + "; ".join(e["msg"] for e in exc.errors())) from None
    await _require_key(console)
    data = await _read_sheet(sheet, console.settings.max_upload_bytes)
    try:
        saved = await asyncio.to_thread(console.store.save, sheet.filename or "sheet.xlsx", data)
    except StorageError as exc:
        raise ApiError(422, str(exc)) from None
    saved.label, saved.uploaded_by = chosen.label, account.name
    await asyncio.to_thread(console.store.write_meta, saved)
    params = _params(console, chosen, source=saved.source, report_dir=console.store.report_dir(saved.id))
    run_id, name = await launch_payout_run(
        console, request, account, params, channel=chosen.channel, upload=saved.id
    )
    return StartedRun(id=str(run_id), name=name, label=params.label)


@router.post("/sheets/check", response_model=dict[str, Any], dependencies=[Depends(size_within_limit)])
async def check(
    console: ConsoleDep,
    account: ApiOperator,
    sheet: Annotated[UploadFile, File(description="The payout sheet (.xlsx, .xlsm or .csv)")],
    column_map: Annotated[str, Form(max_length=2000, description='"Header=field; ..."')] = "",
    label: Annotated[str | None, Form(max_length=128)] = None,
    currency: Annotated[
        str | None,
        Form(pattern=r"^[A-Z]{3}$", description="The sheet's currency, when it has no currency column"),
    ] = None,
) -> dict[str, Any]:
    """`payops check` on the server: the flow's intake alone (same rules, same errors by row and column),
    nothing started or sent; the validation report stays with the upload."""
    from payops.tasks.intake import IntakeOptions
    from payops.tasks.intake.columns import ColumnMapError, parse_column_map
    from payops.tasks.payouts.sheet_check import check_sheet

    try:
        columns = parse_column_map(column_map)
    except ColumnMapError as exc:
        raise ApiError(422, f"column_map: {exc}") from None
    options = IntakeOptions(
        max_bytes=console.settings.max_upload_bytes, column_map=columns, default_currency=currency or None
    )
    data = await _read_sheet(sheet, console.settings.max_upload_bytes)
    try:
        saved = await asyncio.to_thread(console.store.save, sheet.filename or "sheet.xlsx", data)
    except StorageError as exc:
        raise ApiError(422, str(exc)) from None
    saved.uploaded_by = account.name
    await asyncio.to_thread(console.store.write_meta, saved)
    big = console.settings.stream_csv_over_bytes
    report_dir = console.store.report_dir(saved.id)
    checked = await asyncio.to_thread(
        check_sheet,
        saved.source,
        report_dir,
        label,
        options,
        stream_over_bytes=big,
        engine=console.engine,  # the runs that paid the sheet or its rows lately are named
        paid_before_days=console.settings.paid_before_days,
    )
    return checked.as_json()


async def _newest(name_or_id: str) -> list[RunRecord]:
    found = await find_payout_runs(name_or_id)
    if not found:
        raise ApiError(404, f"no payout run with name, label or id {name_or_id!r}")
    return found


@router.post("/runs/retry-failed", status_code=201, response_model=StartedRun)
async def retry_failed(
    request: Request, console: ConsoleDep, account: ApiOperator, body: RetryRequest
) -> StartedRun:
    """Pay a run's failed and refused rows again as NAME-retryN, NAME being the name the run is shown by (as
    the console names it; each row at most once: the retry claims its rows; nothing is paid twice). The run
    is given by its name, label or flow run id."""
    await _require_key(console)
    record = (await _newest(body.label))[0]
    report_dir, label = record.report_dir, record.label or body.label
    if not report_dir or not console.store.holds_reports_of(report_dir):
        raise ApiError(409, f"the reports of {body.label} are not under this server's report folder")
    retries = RetryRows(console.engine)
    try:
        sheet = await asyncio.to_thread(prepare_retry, report_dir, label, retries, record.name)
    except RetryRefused as exc:
        raise ApiError(409, str(exc)) from None
    except OSError as exc:
        raise ApiError(500, f"could not write the retry sheet: {type(exc).__name__}") from None
    carried = {"label": sheet.label, "column_map": sheet.column_map, "currency": sheet.currency or None}
    options = body.options.model_copy(update=carried)
    params = _params(console, options, source=sheet.source, report_dir=report_dir)
    run_id, name = await launch_payout_run(
        console, request, account, params, channel=options.channel, retry_of=label, rows=sheet.rows
    )
    return StartedRun(
        id=str(run_id),
        name=name,
        label=sheet.label,
        rows=sheet.rows,
        while_running=sheet.while_running,
        fails_again=[FailsAgainRow(**dead._asdict()) for dead in sheet.fails_again],
    )


@router.get("/runs", response_model=list[RunRecordOut])
async def runs(
    console: ConsoleDep, account: ApiViewer, limit: Annotated[int, Query(ge=1, le=200)] = 20
) -> list[dict[str, Any]]:
    """Recent payout runs, newest first."""
    return [r.as_dict() for r in await recent_payout_runs(limit)]


async def _waiting(console: Console, run_id: UUID) -> ApprovalWait | None:
    state = await pending(console.engine, run_id)
    if state is None:
        return None
    request = state.request
    return ApprovalWait(
        required=state.required,
        still_needed=state.still_needed,
        excluded=list(state.excluded),
        findings={k: list(v) for k, v in request.findings.items()},
        paid_before=[e.sentence(request.rows) for e in earlier_runs(request.paid_before)],
        approvers=state.approvers,
        started=Start(request.channel, request.initiator, request.uploader).describe(),
        deadline=request.deadline.replace(tzinfo=UTC).isoformat(),
        rows=request.rows,
        totals={cur: str(f["amount"]) for cur, f in request.totals.items()},
    )


@router.get("/runs/{run}", response_model=RunOut)
async def run(run: str, console: ConsoleDep, account: ApiViewer) -> RunOut:
    """One payout run (the newest of that name, label or id): its state, the approval it waits for, and its
    summary once final."""
    found = await _newest(run)
    record = found[0]
    view = await read_run(UUID(record.id), console.store.upload_id_of_report_dir)
    if view is None:
        raise ApiError(404, f"no payout run with name, label or id {run!r}")
    summary = await asyncio.to_thread(RunSummaries(console.engine).get, view.id) if view.final else None
    reports = await asyncio.to_thread(console.store.reports, view.upload_id) if view.upload_id else []
    return RunOut(
        id=view.id,
        name=view.name,
        state=view.state_name,
        state_type=view.state_type,
        final=view.final,
        paused=view.paused,
        message=view.message,
        progress=view.progress,
        record=record.as_dict(),
        approval=await _waiting(console, UUID(view.id)) if view.paused else None,
        summary=summary,
        reports=reports,
        others=[r.id for r in found[1:]],
    )


@router.get("/runs/{run_id}/reports/{name}")
async def report(
    request: Request, run_id: UUID, name: str, console: ConsoleDep, account: ApiViewer
) -> Response:
    """One report file of a run the server started (its folder's listing names them)."""
    view = await read_run(run_id, console.store.upload_id_of_report_dir)
    if view is None or not view.upload_id:
        raise ApiError(404, "no reports for this run on this server")
    try:
        data = await asyncio.to_thread(console.store.open_report, view.upload_id, name)
    except StorageError:
        raise ApiError(404, "no such report for this run") from None
    console.audit(request, account.name, "report.downloaded", f"run:{run_id}", report=name, via="api")
    return report_response(name, data)


async def _paused_run(name_or_id: str) -> UUID:
    """The run itself (an id), or the newest run of that name waiting for approval."""
    try:
        return UUID(name_or_id)
    except ValueError:
        pass
    found = await _newest(name_or_id)
    paused = [r for r in found if r.state in ("Paused", "Suspended")]
    if not paused:
        newest = found[0].state
        raise ApiError(409, f"no run named {name_or_id!r} waits for approval (the newest is {newest})")
    return UUID(paused[0].id)


@router.post("/runs/{run}/approval", response_model=Said)
async def approval(
    request: Request, run: str, console: ConsoleDep, account: ApiApprover, body: DecisionRequest
) -> Said:
    """Approve or reject a run waiting for approval, as the caller: the server signs the approval over the
    rows and totals the run recorded; the run resumes once the policy's count is in."""
    run_id = await _paused_run(run)
    try:
        message = await console.decide(
            request,
            account,
            run_id,
            approve=body.decision == "approve",
            reason=body.comment,
            acknowledged=list(body.acknowledge),
        )
    except DecisionError as exc:
        raise ApiError(exc.status, exc.message) from None
    except ApprovalKeyMissing as exc:
        raise ApiError(503, f"the payops server cannot sign: {exc}") from None
    return Said(message=message)
