"""The runs list, a run's page (state, approval, what needs a person, reports), report downloads, notices."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from payops.store.notices import NoticeView
from payops.store.retries import RetryRows
from payops.store.users import PERMISSIONS

from ..deps import ConsoleDep, Viewer, parse_run_id
from ..errors import ConsoleError
from ..reconciliation_view import reconciliation_context
from ..run_review import failed_so_far, review_context
from ..runs import RunView, read_run, recent_runs, run_ids_named, run_names
from ..state import Console
from ..storage import StorageError
from .approvals import approval_context

router = APIRouter()
MEDIA_TYPES = {
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".csv": "text/csv; charset=utf-8",
    ".json": "application/json",
}


def shown_report_names(files: list[str], run_name: str) -> dict[str, str]:
    """Each report file of a run as people see it, under the run's name: a run shown as
    ``payroll-nov-2026-v3`` whose label is ``sheet-387d94df92fe`` lists ``payroll-nov-2026-v3.xlsx``, not
    ``sheet-387d94df92fe.xlsx`` (one name per run; the files keep the label, which their links use). The
    label's file stem is the shortest stem of the run's JSON reports."""
    stems = [f.removesuffix(".json") for f in files if f.endswith(".json")]
    stem = min(stems, key=len) if stems else ""
    shown = re.sub(r"[^A-Za-z0-9._-]+", "-", run_name).strip("-.")
    if not stem or not shown:
        return {f: f for f in files}
    return {f: shown + f[len(stem) :] if f.startswith(stem) else f for f in files}


def report_response(path: str, data: bytes, shown: str | None = None) -> Response:
    """A report file as a download, saved as ``shown`` (default its own name), reduced to safe characters
    for the header."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(shown or path).name) or "report"
    return Response(
        data,
        media_type=MEDIA_TYPES.get(Path(name).suffix.lower(), "application/octet-stream"),
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@router.get("/runs", response_class=HTMLResponse)
async def runs(request: Request, console: ConsoleDep, account: Viewer) -> Response:
    views = await recent_runs(console.store.upload_id_of_report_dir)
    notices = await asyncio.to_thread(console.notices.for_user, account.name, account.role)
    return await console.render(request, "runs.html", {"runs": views, "notices": await named(notices)})


@router.get("/notices", response_class=HTMLResponse)
async def notices(request: Request, console: ConsoleDep, account: Viewer) -> Response:
    """Every notice for this user, newest first: runs to approve, reminders, expiries (open until decided),
    and what became of their own runs (new until this page shows them, then read)."""
    found = await asyncio.to_thread(console.notices.for_user, account.name, account.role, open_only=False)
    await asyncio.to_thread(console.notices.mark_read, account.name)
    return await console.render(request, "notices.html", {"notices": await named(found)})


async def named(notices: list[NoticeView]) -> list[NoticeView]:
    """Notices naming each run as its page does: the flow names a run by its label in a notice, and a run
    started without one (its label the sheet's fingerprint) is shown by its sheet's name."""
    names = await run_names([n.flow_run_id for n in notices])
    renamed = []
    for n in notices:
        name = names.get(n.flow_run_id, n.label)
        renamed.append(dataclasses.replace(n, label=name, text=n.text.replace(n.label, name)))
    return renamed


async def retry_family(console: Console, view: RunView, summary: dict[str, Any] | None) -> dict[str, Any]:
    """The run's place among retries, for links: the run a retry pays the failed rows of (``retry_of``:
    name, id) and this run's own retries (``retries``: name, id or None before it starts)."""
    retries = RetryRows(console.engine)
    label = summary.get("label") if summary else None
    if not label:
        label = await asyncio.to_thread(retries.label_of_run, view.id)
    names = list(await asyncio.to_thread(retries.retries, str(label))) if label else []
    ids = await run_ids_named(names)
    retry_of, upload = None, None
    if view.upload_id:
        try:
            upload = await asyncio.to_thread(console.store.load, view.upload_id)
        except StorageError:
            upload = None
    if upload is not None and upload.retry_of:
        original = await read_run(UUID(upload.retry_of), console.store.upload_id_of_report_dir)
        retry_of = (original.name, original.id) if original else None
    return {"retries": [(name, ids.get(name)) for name in names], "retry_of": retry_of}


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(request: Request, run_id: str, console: ConsoleDep, account: Viewer) -> Response:
    flow_run_id = parse_run_id(run_id)
    view = await read_run(flow_run_id, console.store.upload_id_of_report_dir)
    if view is None:
        raise ConsoleError(404, "No such payout run.")
    reports: dict[str, str] = {}
    summary = None
    early_retry = None
    if view.upload_id:
        files = await asyncio.to_thread(console.store.reports, view.upload_id)
        reports = shown_report_names(files, view.name)
        if view.final:
            summary = await asyncio.to_thread(console.store.summary, view.upload_id)
        elif account.role in PERMISSIONS["upload"]:
            early_retry = await asyncio.to_thread(failed_so_far, RetryRows(console.engine), view.id)
    decisions = await asyncio.to_thread(console.approvals.decisions, str(flow_run_id))
    reconciliation = await asyncio.to_thread(reconciliation_context, console.engine, summary)
    return await console.render(
        request,
        "run.html",
        {
            "run": view,
            "reports": reports,
            "summary": summary,
            "prefect_link": console.run_link(view.id),
            "decisions": decisions,
            "early_retry": early_retry,
            **await retry_family(console, view, summary),
            **await approval_context(console, flow_run_id, account, request.query_params),
            **review_context(summary, request.query_params.get("page")),
            **reconciliation,
        },
    )


@router.get("/runs/{run_id}/reports/{name}")
async def report(request: Request, run_id: str, name: str, console: ConsoleDep, account: Viewer) -> Response:
    view = await read_run(parse_run_id(run_id), console.store.upload_id_of_report_dir)
    if view is None or not view.upload_id:
        raise ConsoleError(404, "No reports for this run.")
    try:
        data = await asyncio.to_thread(console.store.open_report, view.upload_id, name)
    except StorageError:
        raise ConsoleError(404, "No such report for this run.") from None
    console.audit(request, account.name, "report.downloaded", f"run:{run_id}", report=name)
    files = await asyncio.to_thread(console.store.reports, view.upload_id)
    return report_response(name, data, shown_report_names(files, view.name).get(name))


@router.get("/reports/{path:path}")
async def report_file(request: Request, path: str, console: ConsoleDep, account: Viewer) -> Response:
    """Any report under the report root: the links of the flows' Prefect artifacts point here."""
    try:
        data = await asyncio.to_thread(console.store.open_under_root, path)
    except StorageError:
        raise ConsoleError(404, "No such report.") from None
    console.audit(request, account.name, "report.downloaded", f"report:{path}")
    return report_response(path, data)
