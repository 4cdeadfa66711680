"""The operations console: login, sheet upload with validation preview, run pages, reports, webhooks."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import defaultdict
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.datastructures import UploadFile

from deployments.run_history import find_payout_run
from flows.payouts import PayoutRunParams
from tasks.intake import IntakeError, IntakeOptions, IntakeResult, read_payout_sheet
from tasks.reports import report_paths
from tasks.retry_sheet import RetryRefused, resubmission_csv, retry_label

from .run_review import review_context
from .runs import DeploymentLauncher, LocalLauncher, RunLauncher, answer_approval, read_run, recent_runs
from .security import LoginThrottle, PasswordHash, Signer, new_nonce
from .settings import ConsoleSettings
from .storage import StorageError, Upload, UploadStore
from .webhooks import Emitter, WebhookService, default_emitter, webhook_router

log = logging.getLogger("payops.console")

HERE = Path(__file__).parent
SESSION_COOKIE, CSRF_COOKIE = "payops_session", "payops_csrf"
PREVIEW_ERRORS = 200
MEDIA_TYPES = {
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".csv": "text/csv; charset=utf-8",
    ".json": "application/json",
}


class ConsoleError(Exception):
    """An error page for the operator: ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Console:
    """State shared by the routes (settings, signer, stores, launcher)."""

    def __init__(self, settings: ConsoleSettings, launcher: RunLauncher) -> None:
        self.settings = settings
        password = settings.console_password.get_secret_value() if settings.console_password else ""
        self.password = PasswordHash(password) if password else None
        key_setting = settings.console_session_key
        key = key_setting.get_secret_value().encode() if key_setting else None
        self.signer = Signer(key or secrets.token_bytes(32))
        self.throttle = LoginThrottle()
        self.store = UploadStore(settings.upload_url, settings.report_url)
        self.launcher = launcher
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))

    # -- sessions and CSRF ---------------------------------------------------------------------------------
    def logged_in(self, request: Request) -> bool:
        payload = self.signer.unsign(request.cookies.get(SESSION_COOKIE))
        return bool(payload and payload.get("sub") == "operator")

    def check_csrf(self, request: Request, form: Any) -> None:
        token = form.get("csrf_token")
        token = token if isinstance(token, str) else None
        if not self.signer.csrf_ok(request.cookies.get(CSRF_COOKIE), token):
            raise ConsoleError(403, "The form expired or did not come from this console. Reload and retry.")

    def _cookie(self, response: Response, name: str, value: str, max_age: int) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            httponly=True,
            samesite="lax",
            secure=self.settings.console_secure_cookies,
            path="/",
        )

    def render(
        self, request: Request, template: str, context: dict[str, Any], status: int = 200
    ) -> HTMLResponse:
        nonce = request.cookies.get(CSRF_COOKIE)
        fresh = not nonce
        nonce = nonce or new_nonce()
        context = {
            "csrf_token": self.signer.csrf_token(nonce),
            "logged_in": self.logged_in(request),
            "mode": self.launcher.mode,
            **context,
        }
        response = self.templates.TemplateResponse(request, template, context, status_code=status)
        if fresh:
            self._cookie(response, CSRF_COOKIE, nonce, self.settings.console_session_ttl_s)
        return response

    def login_response(self) -> RedirectResponse:
        response = RedirectResponse("/", status_code=303)
        token = self.signer.sign({"sub": "operator"}, self.settings.console_session_ttl_s)
        self._cookie(response, SESSION_COOKIE, token, self.settings.console_session_ttl_s)
        return response

    def run_link(self, flow_run_id: str) -> str | None:
        ui = self.settings.ui_url()
        return f"{ui}/runs/flow-run/{flow_run_id}" if ui else None


def _preview(result: IntakeResult) -> dict[str, Any]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in result.rows:
        totals[row.currency] += row.amount
    return {
        "rows_total": result.rows_total,
        "rows_valid": len(result.rows),
        "rows_invalid": result.rows_invalid,
        "errors": [asdict(e) for e in result.errors[:PREVIEW_ERRORS]],
        "errors_total": len(result.errors),
        "warnings": [asdict(w) for w in result.warnings[:PREVIEW_ERRORS]],
        "totals": {c: f"{v:,.2f}" for c, v in sorted(totals.items())},
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


def _parse_uuid(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise ConsoleError(404, "No such run.") from None


def create_app(
    settings: ConsoleSettings | None = None,
    *,
    launcher: RunLauncher | None = None,
    emitter: Emitter = default_emitter,
) -> FastAPI:
    """The console app. ``launcher`` default: the configured deployment, else local single-process mode."""
    settings = settings or ConsoleSettings()
    if launcher is None:
        deployment = settings.payout_deployment
        launcher = DeploymentLauncher(deployment) if deployment else LocalLauncher()
    console = Console(settings, launcher)
    # -- webhooks: durable inbox, receiver and relay (all in .webhooks); the relay runs in the lifespan --
    webhooks = WebhookService(settings, emitter)
    app = FastAPI(
        title="payops console", docs_url=None, redoc_url=None, openapi_url=None, lifespan=webhooks.lifespan
    )
    app.state.webhooks = webhooks
    app.include_router(webhook_router(webhooks.receiver))
    # -- end webhooks --
    app.state.console = console
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.exception_handler(ConsoleError)
    async def console_error(request: Request, exc: ConsoleError) -> Response:
        return console.render(request, "error.html", {"message": exc.message}, status=exc.status)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        ref = secrets.token_hex(4)
        log.error("console error %s on %s %s", ref, request.method, request.url.path, exc_info=exc)
        message = f"Something went wrong (reference {ref}). The details are in the console's log."
        if type(exc).__name__ in {"ConnectError", "ConnectTimeout", "PrefectHTTPStatusError", "ReadTimeout"}:
            message = f"The Prefect server did not answer (reference {ref}). Try again in a moment."
        return console.render(request, "error.html", {"message": message}, status=500)

    def need_login(request: Request) -> RedirectResponse | None:
        return None if console.logged_in(request) else RedirectResponse("/login", status_code=303)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "mode": console.launcher.mode})

    @app.get("/login", response_class=HTMLResponse)
    async def login_page(request: Request) -> Response:
        return console.render(request, "login.html", {"configured": console.password is not None})

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=5)
        console.check_csrf(request, form)
        client = request.client.host if request.client else "?"
        if console.password is None:
            raise ConsoleError(503, "No operator password is configured (PAYOPS_CONSOLE_PASSWORD).")
        if console.throttle.blocked(client):
            raise ConsoleError(429, "Too many failed logins. Wait a few minutes.")
        password = form.get("password")
        ok = isinstance(password, str) and await asyncio.to_thread(console.password.verify, password)
        if not ok:
            console.throttle.failed(client)
            log.warning("failed console login from %s", client)
            return console.render(request, "login.html", {"configured": True, "failed": True}, status=401)
        console.throttle.succeeded(client)
        return console.login_response()

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=5)
        console.check_csrf(request, form)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @app.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> Response:
        if redirect := need_login(request):
            return redirect
        return console.render(request, "upload.html", {"max_mb": settings.max_upload_mb})

    @app.post("/upload", response_class=HTMLResponse)
    async def upload(request: Request) -> Response:
        if redirect := need_login(request):
            return redirect
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > settings.max_upload_bytes + 64 * 1024:
            raise ConsoleError(413, f"The file is larger than {settings.max_upload_mb:g} MB.")
        form = await request.form(max_files=1, max_fields=5)
        console.check_csrf(request, form)
        file = form.get("sheet")
        if not isinstance(file, UploadFile) or not file.filename:
            raise ConsoleError(400, "Choose a sheet to upload.")
        data = await _read_upload(file, settings.max_upload_bytes)
        return await check_and_preview(request, file.filename, data)

    async def check_and_preview(request: Request, filename: str, data: bytes, label: str | None = None):
        """Store a sheet as an upload, check it as the flow will, show the preview (the submit form)."""
        try:
            saved = await asyncio.to_thread(console.store.save, filename, data)
        except StorageError as exc:
            raise ConsoleError(400, str(exc)) from None
        saved.label = label
        preview: dict[str, Any] | None = None
        try:
            result = await asyncio.to_thread(
                read_payout_sheet, saved.source, IntakeOptions(max_bytes=settings.max_upload_bytes)
            )
        except IntakeError as exc:
            saved.refused = str(exc)
        else:
            preview = _preview(result)
            saved.rows_total, saved.rows_invalid, saved.errors = (
                result.rows_total,
                result.rows_invalid,
                len(result.errors),
            )
        await asyncio.to_thread(console.store.write_meta, saved)
        log.info(
            "upload %s (%s, %d bytes): %d rows, %d errors",
            saved.id,
            saved.filename,
            saved.size,
            saved.rows_total,
            saved.errors,
        )
        can_submit = saved.refused is None and saved.errors == 0 and saved.rows_total > 0
        status = 200 if can_submit else 422
        return console.render(
            request,
            "preview.html",
            {"upload": saved, "preview": preview, "can_submit": can_submit},
            status=status,
        )

    @app.post("/runs")
    async def submit(request: Request) -> Response:
        if redirect := need_login(request):
            return redirect
        form = await request.form(max_files=0, max_fields=10)
        console.check_csrf(request, form)
        try:
            upload: Upload = await asyncio.to_thread(console.store.load, str(form.get("upload_id") or ""))
        except StorageError as exc:
            raise ConsoleError(404, str(exc)) from None
        if upload.refused or upload.errors or not upload.rows_total:
            raise ConsoleError(409, "This sheet has errors; fix it and upload it again. Nothing was sent.")
        params = PayoutRunParams(
            source=upload.source,
            label=upload.label,
            report_dir=console.store.report_dir(upload.id),
            require_approval=form.get("require_approval") == "on",
            dry_run=form.get("dry_run") == "on",
            credentials_block=settings.credentials_block,
        )
        run_id = await console.launcher.start(params, f"console-{upload.id}")
        log.info("upload %s: payout run %s started (%s mode)", upload.id, run_id, console.launcher.mode)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    @app.get("/runs", response_class=HTMLResponse)
    async def runs(request: Request) -> Response:
        if redirect := need_login(request):
            return redirect
        views = await recent_runs(console.store.upload_id_of_report_dir)
        return console.render(request, "runs.html", {"runs": views})

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    async def run_page(request: Request, run_id: str) -> Response:
        if redirect := need_login(request):
            return redirect
        view = await read_run(_parse_uuid(run_id), console.store.upload_id_of_report_dir)
        if view is None:
            raise ConsoleError(404, "No such payout run.")
        reports: list[str] = []
        summary = None
        if view.upload_id:
            reports = await asyncio.to_thread(console.store.reports, view.upload_id)
            if view.final:
                summary = await asyncio.to_thread(console.store.summary, view.upload_id)
        return console.render(
            request,
            "run.html",
            {
                "run": view,
                "reports": reports,
                "summary": summary,
                "prefect_link": console.run_link(view.id),
                **review_context(summary, request.query_params.get("page")),
            },
        )

    @app.post("/runs/{run_id}/approval")
    async def approval(request: Request, run_id: str) -> Response:
        if redirect := need_login(request):
            return redirect
        form = await request.form(max_files=0, max_fields=5)
        console.check_csrf(request, form)
        flow_run_id = _parse_uuid(run_id)
        view = await read_run(flow_run_id, console.store.upload_id_of_report_dir)
        if view is None or not view.paused:
            raise ConsoleError(409, "This run is not waiting for approval.")
        approve = form.get("decision") == "approve"
        comment = str(form.get("comment") or "")[:500]
        await answer_approval(flow_run_id, approve, comment)
        log.info("run %s %s by the operator", run_id, "approved" if approve else "rejected")
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    @app.get("/runs/{run_id}/reports/{name}")
    async def report(request: Request, run_id: str, name: str) -> Response:
        if redirect := need_login(request):
            return redirect
        view = await read_run(_parse_uuid(run_id), console.store.upload_id_of_report_dir)
        if view is None or not view.upload_id:
            raise ConsoleError(404, "No reports for this run.")
        try:
            data = await asyncio.to_thread(console.store.open_report, view.upload_id, name)
        except StorageError:
            raise ConsoleError(404, "No such report for this run.") from None
        suffix = Path(name).suffix.lower()
        return Response(
            data,
            media_type=MEDIA_TYPES.get(suffix, "application/octet-stream"),
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    @app.post("/runs/{run_id}/retry", response_class=HTMLResponse)
    async def retry_failed_rows(request: Request, run_id: str) -> Response:
        """Retry failed rows: the resubmission sheet becomes a new upload labelled LABEL-retryN, checked and
        submitted like any upload. A retry already started (or finished) is refused: nothing is paid twice."""
        if redirect := need_login(request):
            return redirect
        form = await request.form(max_files=0, max_fields=5)
        console.check_csrf(request, form)
        view = await read_run(_parse_uuid(run_id), console.store.upload_id_of_report_dir)
        if view is None or not view.upload_id or not view.final:
            raise ConsoleError(409, "Only a finished run started from this console can be retried.")
        summary = await asyncio.to_thread(console.store.summary, view.upload_id)
        if not summary or not summary.get("label"):
            raise ConsoleError(409, "This run has no report to retry from.")
        label = str(summary["label"])
        retry = retry_label(label)
        if await find_payout_run(retry) is not None:
            raise ConsoleError(
                409, f"A retry of this run already exists (run {retry}); nothing was sent again. See Runs."
            )
        report_xlsx = report_paths(console.store.report_dir(view.upload_id), label)["xlsx"]
        try:
            data, count = await asyncio.to_thread(resubmission_csv, report_xlsx)
        except RetryRefused as exc:
            raise ConsoleError(409, str(exc)) from None
        if not count:
            raise ConsoleError(409, "This run has no failed or refused rows to retry.")
        log.info("run %s: retry of %d row(s) prepared as %s", run_id, count, retry)
        return await check_and_preview(request, f"{retry}.csv", data, label=retry)

    return app
