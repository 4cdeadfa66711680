"""Uploading a sheet, its validation preview, starting its run, and retrying a run's failed rows."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict
from decimal import Decimal
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from payops.flows.payouts import PayoutRunParams
from payops.store.reconciliation import ReconciliationStore
from payops.store.retries import RetryConflict, RetryRows
from payops.store.users import PERMISSIONS, Account
from payops.tasks.approval.approval_gate import requirement, totals_by_currency
from payops.tasks.approval.approvals import Start
from payops.tasks.intake import IntakeError, IntakeOptions, IntakeResult, read_payout_sheet
from payops.tasks.intake.columns import (
    FIELDS,
    REQUIRED,
    ColumnMapError,
    ColumnsUnmatched,
    currency_note,
    format_column_map,
    mapping_from_choices,
    parse_column_map,
)
from payops.tasks.payouts.paid_before import PaidBefore, paid_before
from payops.tasks.payouts.retry_sheet import RetryRefused, plan_retry, retry_reasons, retry_sheet
from payops.tasks.payouts.sheet_check import no_name_column, run_label, sheet_fingerprint
from payops.tasks.wire.money import money
from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import FormData, UploadFile

from ..deps import ConsoleDep, Operator, Viewer, checked_form, parse_run_id, size_within_limit, text
from ..errors import ConsoleError, refusal_words
from ..launching import launch_payout_run
from ..run_review import MAX_RETRY_ROWS, RetryUpload, dropped_rows, sheet_rows
from ..runs import read_run, run_ids_named
from ..state import Console
from ..storage import StorageError, Upload

log = logging.getLogger("payops.console")
router = APIRouter()
PREVIEW_ERRORS = 200
UploadForm = Annotated[FormData, Depends(checked_form(max_fields=5, max_files=1))]
SubmitForm = Annotated[FormData, Depends(checked_form(max_fields=10))]
RetryForm = Annotated[FormData, Depends(checked_form(max_fields=MAX_RETRY_ROWS + 5))]
MappingForm = Annotated[FormData, Depends(checked_form(max_fields=len(FIELDS) + 3))]


def _preview(result: IntakeResult) -> dict[str, Any]:
    totals = totals_by_currency(result.rows)
    return {
        "rows_total": result.rows_total,
        "rows_valid": len(result.rows),
        "rows_invalid": result.rows_invalid,
        "errors": [asdict(e) for e in result.errors[:PREVIEW_ERRORS]],
        "errors_total": len(result.errors),
        "warnings": [asdict(w) for w in result.warnings[:PREVIEW_ERRORS]],
        "totals": {c: money(v) for c, v in totals.items()},
        "ignored_columns": list(result.ignored),
        "currency": currency_note(result.currency, result.currency_header) if result.currency else None,
        "no_name_column": no_name_column(result),
        "sample": [
            r.model_dump(
                include={"row", "reference", "amount", "currency", "provider", "destination", "payee_name"}
            )
            for r in result.rows[:10]
        ],
    }


async def _read_upload(file: UploadFile, limit: int) -> bytes:
    data = bytearray()
    while chunk := await file.read(256 * 1024):
        data += chunk
        if len(data) > limit:
            raise ConsoleError(413, f"The file is larger than {limit // (1024 * 1024)} MB.")
    return bytes(data)


@router.get("/", response_class=HTMLResponse)
async def home(request: Request, console: ConsoleDep, account: Viewer) -> Response:
    if account.role not in PERMISSIONS["upload"]:
        return RedirectResponse("/runs", status_code=303)
    return await console.render(request, "upload.html", {"max_mb": console.settings.max_upload_mb})


@router.post("/upload", response_class=HTMLResponse, dependencies=[Depends(size_within_limit)])
async def upload(request: Request, console: ConsoleDep, account: Operator, form: UploadForm) -> Response:
    file = form.get("sheet")
    if not isinstance(file, UploadFile) or not file.filename:
        raise ConsoleError(400, "Choose a sheet to upload.")
    data = await _read_upload(file, console.settings.max_upload_bytes)
    return await check_and_preview(request, console, account, file.filename, data)


async def check_and_preview(
    request: Request,
    console: Console,
    account: Account,
    filename: str,
    data: bytes,
    label: str | None = None,
    retry: RetryUpload | None = None,
) -> Response:
    """Store a sheet as an upload, check it as the flow will, show the preview (the submit form); a retry
    sheet is read with its run's column mapping and listed row by row (the operator may drop rows)."""
    try:
        saved = await asyncio.to_thread(console.store.save, filename, data)
    except StorageError as exc:
        raise ConsoleError(400, str(exc)) from None
    saved.label = label
    saved.uploaded_by = account.name
    if retry is not None:
        saved.column_map, saved.retry_of, saved.currency = retry.column_map, retry.run_id, retry.currency
        saved.retry_parent, saved.retry_refs = retry.parent, list(retry.references)
    return await check_upload(request, console, account, saved, retry)


async def check_upload(
    request: Request, console: Console, account: Account, saved: Upload, retry: RetryUpload | None = None
) -> Response:
    """Check a stored upload as the flow will (with its column mapping and chosen currency) and show the
    preview, with the mapping step (not for a retry, read as its run read it): every field with the header
    payops matched to it, to correct, and the sheet's currency when it has no currency column."""
    settings = console.settings
    saved.refused, saved.rows_total, saved.rows_invalid, saved.errors = None, 0, 0, 0
    mapping: dict[str, Any] | None = None
    preview: dict[str, Any] | None = None
    retry_rows: list[dict[str, Any]] | None = None
    paid: PaidBefore | None = None
    totals: dict[str, Decimal] = {}
    refused: str | None = None  # the refusal in the console's words (the upload keeps the intake's)
    options = IntakeOptions(
        max_bytes=settings.max_upload_bytes,
        column_map=parse_column_map(saved.column_map),
        default_currency=saved.currency or None,
    )
    try:
        result = await asyncio.to_thread(read_payout_sheet, saved.source, options)
    except ColumnsUnmatched as exc:
        saved.refused, refused = str(exc), refusal_words(exc)
        mapping = _mapping_step(options, exc.headers, exc.guessed, saved.currency, None)
    except IntakeError as exc:
        saved.refused, refused = str(exc), refusal_words(exc)
    else:
        preview = _preview(result)
        if retry is None and not saved.retry_of:
            header_code = result.currency if result.currency_header else None
            mapping = _mapping_step(options, result.columns, result.mapped, saved.currency, header_code)
        retry_rows = sheet_rows(result, retry.reasons) if retry is not None else None
        totals = totals_by_currency(result.rows)
        saved.rows_total, saved.rows_invalid, saved.errors = (
            result.rows_total,
            result.rows_invalid,
            len(result.errors),
        )
        saved.total = money(sum(totals.values(), Decimal(0)))
        saved.totals = {c: money(t) for c, t in totals.items()}
        paid = await asyncio.to_thread(_paid_before, console, saved, result, options)
    await asyncio.to_thread(console.store.write_meta, saved)
    log.info(
        "upload %s (%s, %d bytes): %d rows, %d errors",
        saved.id,
        saved.filename,
        saved.size,
        saved.rows_total,
        saved.errors,
    )
    console.audit(
        request,
        account.name,
        "upload.previewed",
        f"upload:{saved.id}",
        filename=saved.filename,
        rows=saved.rows_total,
        errors=saved.errors,
        total=saved.total,
        refused=refused,  # as the operator was told (the upload keeps the intake's words)
    )
    can_submit = saved.refused is None and saved.errors == 0 and saved.rows_total > 0
    status = 200 if can_submit else 422
    policy = await asyncio.to_thread(console.approvals.policy)
    start = Start("console", account.name, saved.uploaded_by or account.name)
    required = requirement(policy, totals, start).required
    context = {
        "upload": saved,
        "refused": refused,
        "preview": preview,
        "can_submit": can_submit,
        "required": required,
        # the box is offered only when ticking it asks for more than the policy does
        "can_raise": requirement(policy, totals, start, require_approval=True).required > required,
        "policy": policy.describe(),
        "retry": retry,
        "retry_rows": retry_rows,
        "mapping": mapping,
        "paid_before": paid,
    }
    return await console.render(request, "preview.html", context, status=status)


def _paid_before(console: Console, saved: Upload, result: IntakeResult, options: IntakeOptions) -> PaidBefore:
    """The runs that paid this sheet or its rows lately, for the preview: the sheet is named as the run
    will name it (its label, its fingerprint: `tasks.payouts.sheet_check`); a retry leaves out the runs
    whose failed rows it pays again. A database that cannot be read is said on the page."""
    label = run_label(saved.label, result, options.column_map, options.default_currency)
    sheet = sheet_fingerprint(result, options.column_map, options.default_currency)
    try:
        retried = RetryRows(console.engine).ancestors(label)
        if saved.retry_parent:
            retried.append(saved.retry_parent)
        store = ReconciliationStore(console.engine)
        return paid_before(
            store, result.rows, label, sheet, console.settings.paid_before_days, retried=retried
        )
    except SQLAlchemyError as exc:
        log.error("upload %s: paid before not looked up (%s)", saved.id, type(exc).__name__)
        return PaidBefore(label, 0, unread=f"the payops database could not be read ({type(exc).__name__})")


def _mapping_step(
    options: IntakeOptions,
    headers: Sequence[str],
    guessed: dict[str, str],
    chosen_currency: str,
    header_currency: str | None,
) -> dict[str, Any]:
    """The mapping form: every field with the sheet's headers to pick from, the header payops matched to it
    pre-selected (optional fields may have none); and, when no column holds the currency, the sheet's
    currency: the one its amount header names, or one of the accepted ones to choose."""
    fields = [
        {"name": f, "label": f.replace("_", " "), "required": f in REQUIRED, "guess": guessed.get(f, "")}
        for f in FIELDS
    ]
    currency = None
    if "currency" not in guessed:
        currency = {
            "from_header": header_currency,
            "chosen": chosen_currency,
            "choices": sorted(options.known_currencies | ({chosen_currency} if chosen_currency else set())),
        }
    return {"headers": list(headers), "fields": fields, "currency": currency}


def _headers_of(saved: Upload) -> list[str]:
    """The upload's header row (read as the preview read it); none when the sheet cannot be read."""
    from payops.tasks.intake import read_raw_sheet

    try:
        return read_raw_sheet(saved.source, IntakeOptions()).columns
    except IntakeError:
        return []


@router.get("/uploads/{upload_id}", response_class=HTMLResponse)
async def show_upload(request: Request, upload_id: str, console: ConsoleDep, account: Operator) -> Response:
    """A stored upload's preview, checked again: where the browser goes when a preview (a POST's answer) is
    reloaded. A retry's upload is shown with its run and rows (why each failed comes with the POST only)."""
    try:
        saved: Upload = await asyncio.to_thread(console.store.load, upload_id)
    except StorageError as exc:
        raise ConsoleError(404, str(exc)) from None
    retry = None
    if saved.retry_of:
        view = await read_run(parse_run_id(saved.retry_of), console.store.upload_id_of_report_dir)
        retry = RetryUpload(
            saved.retry_of,
            saved.column_map,
            parent=saved.retry_parent or "",
            references=tuple(saved.retry_refs or ()),
            name=view.name if view is not None else "",
            currency=saved.currency or "",
        )
    return await check_upload(request, console, account, saved, retry)


@router.post("/uploads/{upload_id}/columns", response_class=HTMLResponse)
async def map_upload_columns(
    request: Request, upload_id: str, console: ConsoleDep, account: Operator, form: MappingForm
) -> Response:
    """The mapping step: which header holds which field (``map_<field>`` = header; empty: none) and the
    sheet's currency (``currency``; empty: from the amount header, or none). The upload keeps them, is
    checked again with them, and the run it starts reads the sheet the same way (both are part of its
    fingerprint). Only where the choice differs from what the headers say is it written down
    (`tasks.intake.columns.mapping_from_choices`)."""
    try:
        saved: Upload = await asyncio.to_thread(console.store.load, upload_id)
    except StorageError as exc:
        raise ConsoleError(404, str(exc)) from None
    chosen = {f: text(form, f"map_{f}", 200) for f in FIELDS if f"map_{f}" in form}
    headers = await asyncio.to_thread(_headers_of, saved)
    try:
        mapping = mapping_from_choices(headers, chosen, parse_column_map(saved.column_map))
        saved.column_map = format_column_map(mapping)
        parse_column_map(saved.column_map)
    except ColumnMapError as exc:
        raise ConsoleError(400, str(exc)) from None
    if "currency" in form:
        code = text(form, "currency", 3).strip().upper()
        if code and not re.fullmatch(r"[A-Z]{3}", code):
            raise ConsoleError(400, "Choose the sheet's currency from the list.")
        saved.currency = code
    console.audit(
        request,
        account.name,
        "upload.columns_mapped",
        f"upload:{upload_id}",
        mapping=saved.column_map,
        currency=saved.currency or None,
    )
    return await check_upload(request, console, account, saved)


@router.post("/runs")
async def submit(request: Request, console: ConsoleDep, account: Operator, form: SubmitForm) -> Response:
    try:
        upload: Upload = await asyncio.to_thread(console.store.load, str(form.get("upload_id") or ""))
    except StorageError as exc:
        raise ConsoleError(404, str(exc)) from None
    if upload.refused or upload.errors or not upload.rows_total:
        raise ConsoleError(409, "This sheet has errors; fix it and upload it again. Nothing was sent.")
    require_approval = form.get("require_approval") == "on"
    dry_run = form.get("dry_run") == "on"
    if upload.retry_parent and upload.label and not dry_run:
        await _claim_retry(console, upload.retry_parent, upload.label, upload.retry_refs)
    key = await console.approval_key()
    if key is None:
        policy = await asyncio.to_thread(console.approvals.policy)
        totals = {c: Decimal(t) for c, t in (upload.totals or {"*": upload.total or "0"}).items()}
        if require_approval or policy.required(totals):
            raise ConsoleError(
                503,
                "Approvals need the server's approval signing key (PAYOPS_APPROVAL_SIGNING_KEY_FILE, or "
                "approval-signing-key.pem in the payops home, which `payops serve` makes); nothing was sent.",
            )
    params = PayoutRunParams(
        source=upload.source,
        label=upload.label,
        report_dir=console.store.report_dir(upload.id),
        require_approval=require_approval,
        block_on_name_mismatch=form.get("block_on_name_mismatch") == "on",
        column_map=upload.column_map,
        currency=upload.currency or None,
        dry_run=dry_run,
        credentials_block=console.settings.credentials_block,
    )
    # Without a key (and no approval needed) the run goes without a signed initiator.
    run_id, _ = await launch_payout_run(
        console,
        request,
        account,
        params,
        channel="console",
        uploader=upload.uploaded_by,
        upload=upload.id,
        total=upload.total,
    )
    log.info("upload %s: payout run %s started (%s mode)", upload.id, run_id, console.launcher.mode)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


async def _claim_retry(console: Console, parent: str, label: str, references: list[str]) -> None:
    """Claim a retry's rows for its label before it starts (`store.retries`): another retry that took one of
    them first refuses this one, and nothing is sent."""
    try:
        await asyncio.to_thread(RetryRows(console.engine).claim, parent, label, references)
    except RetryConflict as exc:
        raise ConsoleError(409, f"This retry cannot start: {exc}. Open the run and retry again.") from None


@router.post("/runs/{run_id}/retry", response_class=HTMLResponse)
async def retry_failed_rows(
    request: Request, run_id: str, console: ConsoleDep, account: Operator, form: RetryForm
) -> Response:
    """Retry failed rows, finished or still running (the rows failed so far): those no retry took yet
    become a new upload labelled with the next free NAME-retryN (NAME: the name the run is shown by),
    checked and submitted like any upload, its rows listed; the operator may drop rows (the form posts their
    references as ``drop``) and the sheet is rebuilt without them. Submitting claims the rows for the retry:
    each is paid again at most once."""
    drop = dropped_rows(form.getlist("drop"))
    view = await read_run(parse_run_id(run_id), console.store.upload_id_of_report_dir)
    if view is None or not view.upload_id:
        raise ConsoleError(409, "Only a run started from this console can be retried here.")
    retries = RetryRows(console.engine)
    summary = None
    if view.final:
        summary = await asyncio.to_thread(console.store.summary, view.upload_id)
        label = str(summary["label"]) if summary and summary.get("label") else None
    else:
        label = await asyncio.to_thread(retries.label_of_run, view.id)
    if label is None:
        raise ConsoleError(409, "This run has no failed rows to retry (yet).")
    report_dir = console.store.report_dir(view.upload_id)
    try:
        plan = await asyncio.to_thread(plan_retry, retries, report_dir, label, view.name)
    except RetryRefused as exc:
        raise ConsoleError(409, str(exc)) from None
    if not plan.rows:
        done = list(await asyncio.to_thread(retries.retries, label))
        if done:
            ids = await run_ids_named(done)
            raise ConsoleError(
                409,
                f"A retry of this run already exists (run {', '.join(done)}) for every failed row; nothing "
                "was sent again.",
                [*((name, f"/runs/{ids[name]}") for name in done if name in ids), ("Runs", "/runs")],
            )
        raise ConsoleError(409, "This run has no failed or refused rows to retry.")
    data, count = retry_sheet(plan.rows, drop)
    if not count:
        raise ConsoleError(409, "This run has no rows left after dropping to retry.")
    kept = tuple(r.reference for r in plan.rows if r.reference not in drop)
    log.info("run %s: retry of %d row(s) prepared as %s (%d dropped)", run_id, count, plan.label, len(drop))
    return await check_and_preview(
        request,
        console,
        account,
        f"{plan.label}.xlsx",
        data,
        label=plan.label,
        retry=RetryUpload(
            run_id,
            plan.column_map,
            drop,
            parent=label,
            references=kept,
            reasons=retry_reasons(summary),
            name=view.name,
            currency=plan.currency,
        ),
    )
