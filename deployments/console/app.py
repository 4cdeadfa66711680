"""The operations console: login, sheet upload with validation preview, run pages, reports, webhooks."""

from __future__ import annotations

import asyncio
import logging
import re
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

from deployments.approving import DecisionError, decide, pending
from deployments.auditing import Auditor
from deployments.run_history import find_payout_run
from flows.payouts import PayoutRunParams
from flows.run_params import name_from_parameters
from store import migrate, open_engine
from store.approvals import Approvals
from store.users import Account, Users
from tasks.approvals import ApprovalKeyMissing, load_approval_key, sign_rule
from tasks.intake import IntakeError, IntakeOptions, IntakeResult, read_payout_sheet
from tasks.money import money
from tasks.reports import report_paths
from tasks.retry_sheet import RetryRefused, resubmission_csv, retry_label

from .admin import register_admin
from .errors import ConsoleError, LoginNeeded
from .run_review import review_context
from .runs import DeploymentLauncher, LocalLauncher, RunLauncher, read_run, recent_runs
from .security import CsrfTokens, LoginThrottle, SecurityHeaders, client_address, new_nonce, parse_networks
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


PERMISSIONS = {
    "view": {"operator", "approver", "admin"},  # run list, run pages, reports
    "upload": {"operator"},  # upload sheets, start runs
    "approve": {"approver"},  # approve or reject paused runs
    "admin": {"admin"},  # users, approval rules, audit trail
}


class Console:
    """State shared by the routes (settings, database, stores, launcher)."""

    def __init__(self, settings: ConsoleSettings, launcher: RunLauncher, emitter: Emitter) -> None:
        self.settings = settings
        self.engine = open_engine(settings.database_url)
        migrate(self.engine)
        self.users = Users(self.engine)
        self.approvals = Approvals(self.engine)
        self.auditor = Auditor(self.engine, emitter)
        key_setting = settings.console_session_key
        key = key_setting.get_secret_value().encode() if key_setting else secrets.token_bytes(32)
        self.csrf = CsrfTokens(key, settings.console_session_ttl_s)
        self.trusted_proxies = parse_networks(settings.console_trusted_proxies)
        self.throttle = LoginThrottle()
        self.store = UploadStore(settings.upload_url, settings.report_url)
        self.launcher = launcher
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))

    # -- who is asking -------------------------------------------------------------------------------------
    def client(self, request: Request) -> str:
        return client_address(request, self.trusted_proxies)

    async def account(self, request: Request) -> Account | None:
        if not hasattr(request.state, "account"):
            request.state.account = await asyncio.to_thread(
                self.users.resolve,
                request.cookies.get(SESSION_COOKIE),
                self.settings.console_idle_timeout_s,
                self.settings.console_session_ttl_s,
            )
        return request.state.account

    async def require(self, request: Request, permission: str) -> Account:
        """The logged-in account allowed ``permission``; else a redirect to the login page or a 403."""
        account = await self.account(request)
        if account is None:
            raise LoginNeeded()
        if account.role not in PERMISSIONS[permission]:
            self.audit(request, account.name, "access.denied", f"route:{request.method} {request.url.path}")
            raise ConsoleError(403, f"Your role ({account.role}) cannot do this.")
        return account

    def audit(self, request: Request, actor: str, action: str, obj: str, **detail: Any) -> None:
        self.auditor.record(actor, action, obj, self.client(request), **detail)

    # -- CSRF ----------------------------------------------------------------------------------------------
    async def check_csrf(self, request: Request, form: Any) -> None:
        """The form's token must be bound to this session (or, before login, to this browser's nonce)."""
        account = await self.account(request)
        binding = account.session if account else request.cookies.get(CSRF_COOKIE)
        if not self.csrf.ok(form.get("csrf_token"), binding):
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

    async def render(
        self, request: Request, template: str, context: dict[str, Any], status: int = 200
    ) -> HTMLResponse:
        account = await self.account(request)
        nonce = None
        if account is None:
            nonce = request.cookies.get(CSRF_COOKIE) or new_nonce()
        context = {
            "csrf_token": self.csrf.token(account.session if account else nonce),
            "account": account,
            "logged_in": account is not None,
            "mode": self.launcher.mode,
            **context,
        }
        response = self.templates.TemplateResponse(request, template, context, status_code=status)
        if nonce and nonce != request.cookies.get(CSRF_COOKIE):
            self._cookie(response, CSRF_COOKIE, nonce, self.settings.console_session_ttl_s)
        return response

    def login_response(self, token: str, role: str) -> RedirectResponse:
        response = RedirectResponse("/" if role == "operator" else "/runs", status_code=303)
        self._cookie(response, SESSION_COOKIE, token, self.settings.console_session_ttl_s)
        response.delete_cookie(CSRF_COOKIE, path="/")
        return response

    def run_link(self, flow_run_id: str) -> str | None:
        ui = self.settings.ui_url()
        return f"{ui}/runs/flow-run/{flow_run_id}" if ui else None

    async def approval_key(self) -> bytes | None:
        """The approval signing key, or None when none is configured (runs then cannot be approved)."""
        try:
            return await load_approval_key()
        except ApprovalKeyMissing:
            return None


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


def report_response(path: str, data: bytes) -> Response:
    """A report file as a download (its name reduced to safe characters for the header)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(path).name) or "report"
    return Response(
        data,
        media_type=MEDIA_TYPES.get(Path(name).suffix.lower(), "application/octet-stream"),
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


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
    console = Console(settings, launcher, emitter)
    # -- webhooks: durable inbox, receiver and relay (all in .webhooks); the relay runs in the lifespan --
    webhooks = WebhookService(settings, emitter)
    app = FastAPI(
        title="payops console", docs_url=None, redoc_url=None, openapi_url=None, lifespan=webhooks.lifespan
    )
    app.state.webhooks = webhooks
    app.include_router(webhook_router(webhooks.receiver))
    # -- end webhooks --
    app.state.console = console
    app.add_middleware(SecurityHeaders)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.exception_handler(ConsoleError)
    async def console_error(request: Request, exc: ConsoleError) -> Response:
        return await console.render(request, "error.html", {"message": exc.message}, status=exc.status)

    @app.exception_handler(DecisionError)
    async def decision_error(request: Request, exc: DecisionError) -> Response:
        return await console.render(request, "error.html", {"message": exc.message}, status=exc.status)

    @app.exception_handler(LoginNeeded)
    async def login_needed(request: Request, exc: LoginNeeded) -> Response:
        return RedirectResponse("/login", status_code=303)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        ref = secrets.token_hex(4)
        log.error("console error %s on %s %s", ref, request.method, request.url.path, exc_info=exc)
        message = f"Something went wrong (reference {ref}). The details are in the console's log."
        if type(exc).__name__ in {"ConnectError", "ConnectTimeout", "PrefectHTTPStatusError", "ReadTimeout"}:
            message = f"The Prefect server did not answer (reference {ref}). Try again in a moment."
        return console.templates.TemplateResponse(
            request, "error.html", {"message": message, "account": None}, status_code=500
        )

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "mode": console.launcher.mode})

    @app.get("/login", response_class=HTMLResponse)
    async def login_page(request: Request) -> Response:
        if await console.account(request):
            return RedirectResponse("/", status_code=303)
        return await console.render(request, "login.html", {})

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=5)
        await console.check_csrf(request, form)
        client = console.client(request)
        raw_name, password = form.get("username"), form.get("password")
        name = raw_name.strip().lower()[:64] if isinstance(raw_name, str) else ""
        if not console.throttle.reserve(client, name):
            console.audit(request, name, "login.throttled", f"user:{name}")
            raise ConsoleError(429, "Too many failed logins. Wait a few minutes.")
        user = None
        try:
            if name and isinstance(password, str) and password:
                user = await asyncio.to_thread(console.users.authenticate, name, password)
        finally:
            console.throttle.settle(client, name, user is not None)
        if user is None:
            log.warning("failed console login for %r from %s", name, client)
            console.audit(request, name, "login.failed", f"user:{name}")
            return await console.render(request, "login.html", {"failed": True, "username": name}, status=401)
        token = await asyncio.to_thread(console.users.start_session, user, client)
        console.audit(request, user.name, "login", f"user:{user.name}", role=user.role)
        return console.login_response(token, user.role)

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        account = await console.require(request, "view")
        form = await request.form(max_files=0, max_fields=5)
        await console.check_csrf(request, form)
        await asyncio.to_thread(console.users.end_session, request.cookies.get(SESSION_COOKIE))
        console.audit(request, account.name, "logout", f"user:{account.name}")
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @app.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> Response:
        account = await console.require(request, "view")
        if account.role not in PERMISSIONS["upload"]:
            return RedirectResponse("/runs", status_code=303)
        return await console.render(request, "upload.html", {"max_mb": settings.max_upload_mb})

    @app.post("/upload", response_class=HTMLResponse)
    async def upload(request: Request) -> Response:
        account = await console.require(request, "upload")
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > settings.max_upload_bytes + 64 * 1024:
            raise ConsoleError(413, f"The file is larger than {settings.max_upload_mb:g} MB.")
        form = await request.form(max_files=1, max_fields=5)
        await console.check_csrf(request, form)
        file = form.get("sheet")
        if not isinstance(file, UploadFile) or not file.filename:
            raise ConsoleError(400, "Choose a sheet to upload.")
        data = await _read_upload(file, settings.max_upload_bytes)
        return await check_and_preview(request, account, file.filename, data)

    async def check_and_preview(
        request: Request, account: Account, filename: str, data: bytes, label: str | None = None
    ) -> Response:
        """Store a sheet as an upload, check it as the flow will, show the preview (the submit form)."""
        try:
            saved = await asyncio.to_thread(console.store.save, filename, data)
        except StorageError as exc:
            raise ConsoleError(400, str(exc)) from None
        saved.label = label
        saved.uploaded_by = account.name
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
            saved.total = money(sum((r.amount for r in result.rows), Decimal(0)))
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
            refused=saved.refused,
        )
        can_submit = saved.refused is None and saved.errors == 0 and saved.rows_total > 0
        status = 200 if can_submit else 422
        rule = await asyncio.to_thread(console.approvals.rule)
        required = rule.required(Decimal(saved.total)) if saved.total else 0
        return await console.render(
            request,
            "preview.html",
            {"upload": saved, "preview": preview, "can_submit": can_submit, "required": required},
            status=status,
        )

    @app.post("/runs")
    async def submit(request: Request) -> Response:
        account = await console.require(request, "upload")
        form = await request.form(max_files=0, max_fields=10)
        await console.check_csrf(request, form)
        try:
            upload: Upload = await asyncio.to_thread(console.store.load, str(form.get("upload_id") or ""))
        except StorageError as exc:
            raise ConsoleError(404, str(exc)) from None
        if upload.refused or upload.errors or not upload.rows_total:
            raise ConsoleError(409, "This sheet has errors; fix it and upload it again. Nothing was sent.")
        total = Decimal(upload.total or "0")
        rule = await asyncio.to_thread(console.approvals.rule)
        require_approval = form.get("require_approval") == "on"
        key = await console.approval_key()
        if key is None and (rule.required(total) or require_approval):
            raise ConsoleError(
                503, "Approvals need a signing key (PAYOPS_APPROVAL_KEY or a Secret block); nothing was sent."
            )
        signed_rule = None
        if key is not None:
            signed_rule = sign_rule(
                key, source=upload.source, initiator=account.name, uploader=upload.uploaded_by, rule=rule
            )
        params = PayoutRunParams(
            source=upload.source,
            label=upload.label,
            report_dir=console.store.report_dir(upload.id),
            require_approval=require_approval,
            approval_rule=signed_rule,
            dry_run=form.get("dry_run") == "on",
            credentials_block=settings.credentials_block,
        )
        # One name everywhere: the label, else the sheet's name (as the CLI's and Prefect's runs are named).
        run_id = await console.launcher.start(params, name_from_parameters({"params": params}))
        await asyncio.to_thread(
            console.approvals.record_run, str(run_id), upload.id, account.name, total, rule
        )
        console.audit(
            request,
            account.name,
            "run.started",
            f"run:{run_id}",
            upload=upload.id,
            total=str(total),
            approvals_required=max(rule.required(total), int(require_approval)),
            dry_run=params.dry_run,
        )
        log.info("upload %s: payout run %s started (%s mode)", upload.id, run_id, console.launcher.mode)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    @app.get("/runs", response_class=HTMLResponse)
    async def runs(request: Request) -> Response:
        await console.require(request, "view")
        views = await recent_runs(console.store.upload_id_of_report_dir)
        return await console.render(request, "runs.html", {"runs": views})

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    async def run_page(request: Request, run_id: str) -> Response:
        account = await console.require(request, "view")
        flow_run_id = _parse_uuid(run_id)
        view = await read_run(flow_run_id, console.store.upload_id_of_report_dir)
        if view is None:
            raise ConsoleError(404, "No such payout run.")
        reports: list[str] = []
        summary = None
        if view.upload_id:
            reports = await asyncio.to_thread(console.store.reports, view.upload_id)
            if view.final:
                summary = await asyncio.to_thread(console.store.summary, view.upload_id)
        waiting = await pending(console.engine, flow_run_id) if view.paused else None
        record = await asyncio.to_thread(console.approvals.run, str(flow_run_id))
        decisions = await asyncio.to_thread(console.approvals.decisions, str(flow_run_id))
        return await console.render(
            request,
            "run.html",
            {
                "run": view,
                "reports": reports,
                "summary": summary,
                "prefect_link": console.run_link(view.id),
                "waiting": waiting,
                "may_approve": bool(waiting and waiting.may_approve(account.name, account.role)),
                "record": record,
                "decisions": decisions,
                **review_context(summary, request.query_params.get("page")),
            },
        )

    @app.post("/runs/{run_id}/approval")
    async def approval(request: Request, run_id: str) -> Response:
        account = await console.require(request, "approve")
        form = await request.form(max_files=0, max_fields=5)
        await console.check_csrf(request, form)
        flow_run_id = _parse_uuid(run_id)
        approve = form.get("decision") == "approve"
        message = await decide(
            console.engine,
            console.auditor,
            run_id=flow_run_id,
            user=account.name,
            role=account.role,
            approve=approve,
            reason=str(form.get("comment") or ""),
            client=console.client(request),
        )
        log.info("run %s %s by %s", run_id, "approved" if approve else "rejected", account.name)
        log.info("run %s: %s", run_id, message)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    @app.get("/runs/{run_id}/reports/{name}")
    async def report(request: Request, run_id: str, name: str) -> Response:
        account = await console.require(request, "view")
        view = await read_run(_parse_uuid(run_id), console.store.upload_id_of_report_dir)
        if view is None or not view.upload_id:
            raise ConsoleError(404, "No reports for this run.")
        try:
            data = await asyncio.to_thread(console.store.open_report, view.upload_id, name)
        except StorageError:
            raise ConsoleError(404, "No such report for this run.") from None
        console.audit(request, account.name, "report.downloaded", f"run:{run_id}", report=name)
        return report_response(name, data)

    @app.get("/reports/{path:path}")
    async def report_file(request: Request, path: str) -> Response:
        """Any report under the report root: the links of the flows' Prefect artifacts point here."""
        account = await console.require(request, "view")
        try:
            data = await asyncio.to_thread(console.store.open_under_root, path)
        except StorageError:
            raise ConsoleError(404, "No such report.") from None
        console.audit(request, account.name, "report.downloaded", f"report:{path}")
        return report_response(path, data)

    @app.post("/runs/{run_id}/retry", response_class=HTMLResponse)
    async def retry_failed_rows(request: Request, run_id: str) -> Response:
        """Retry failed rows: the resubmission sheet becomes a new upload labelled LABEL-retryN, checked and
        submitted like any upload. A retry already started (or finished) is refused: nothing is paid twice."""
        account = await console.require(request, "upload")
        form = await request.form(max_files=0, max_fields=5)
        await console.check_csrf(request, form)
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
        return await check_and_preview(request, account, f"{retry}.csv", data, label=retry)

    register_admin(app, console)
    return app
