"""What every console route shares: settings, the database and its stores, CSRF, throttle, templates."""

from __future__ import annotations

import asyncio
import logging
import secrets
from pathlib import Path
from typing import Any
from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from payops.deployments.approving import decide as decide_run
from payops.store import open_database
from payops.store.approval_requests import ApprovalRequests
from payops.store.approvals import Approvals
from payops.store.notices import Notices
from payops.store.users import PERMISSIONS, Account, Users
from payops.tasks.approval.approval_keys import ApprovalKeyMissing, load_signing_key
from payops.tasks.events.auditing import Auditor
from payops.tasks.runtime.plurals import noun_for

from .errors import ConsoleError, LoginNeeded, console_words
from .formats import count, money
from .runs import RunLauncher
from .security import CsrfTokens, LoginThrottle, client_address, new_nonce, parse_networks
from .settings import ConsoleSettings
from .storage import UploadStore
from .webhooks import Emitter

HERE = Path(__file__).parent
log = logging.getLogger("payops.console")
SESSION_COOKIE, CSRF_COOKIE = "payops_session", "payops_csrf"


class Console:
    """State shared by the routes (settings, database, stores, launcher)."""

    def __init__(self, settings: ConsoleSettings, launcher: RunLauncher, emitter: Emitter) -> None:
        self.settings = settings
        self.engine = open_database(settings)  # the process's engine, shared with the webhook relay
        self.users = Users(self.engine)
        self.approvals = Approvals(self.engine)
        self.requests = ApprovalRequests(self.engine)
        self.notices = Notices(self.engine)
        self.auditor = Auditor(self.engine, emitter, key=settings.audit_key_bytes())
        key_setting = settings.console_session_key
        key = key_setting.get_secret_value().encode() if key_setting else secrets.token_bytes(32)
        self.csrf = CsrfTokens(key, settings.console_session_ttl_s)
        self.trusted_proxies = parse_networks(settings.console_trusted_proxies)
        self.throttle = LoginThrottle()
        self.store = UploadStore(settings.uploads, settings.reports)
        self.launcher = launcher
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters["money"] = money
        self.templates.env.filters["count"] = count
        self.templates.env.filters["noun"] = noun_for
        self.templates.env.filters["for_people"] = console_words

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
        notices = 0
        if account is not None:  # runs to approve (approvers), their own runs' outcomes (everyone)
            notices = len(await asyncio.to_thread(self.notices.for_user, account.name, account.role))
        context = {
            "csrf_token": self.csrf.token(account.session if account else nonce),
            "account": account,
            # what this person may do (store.users.PERMISSIONS): a page offers only the actions they can take
            "can": {p: account is not None and account.role in roles for p, roles in PERMISSIONS.items()},
            "logged_in": account is not None,
            "mode": self.launcher.mode,
            "open_notices": notices,
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

    async def decide(
        self,
        request: Request,
        account: Account,
        run_id: UUID,
        *,
        approve: bool,
        reason: str,
        acknowledged: list[str],
    ) -> str:
        """``account``'s decision on a paused run, signed by this server (`deployments.approving.decide`):
        the one path of the console's approval page and the API. DecisionError when refused."""
        return await decide_run(
            self.engine,
            self.auditor,
            self.settings,
            run_id=run_id,
            user=account.name,
            role=account.role,
            approve=approve,
            reason=reason,
            client=self.client(request),
            acknowledged=acknowledged,
        )

    async def approval_key(self) -> Ed25519PrivateKey | None:
        """The approval key's private half this server signs with, or None when it has none (runs then
        cannot be approved); why is logged, never the key."""
        try:
            return await asyncio.to_thread(load_signing_key, self.settings)
        except ApprovalKeyMissing as exc:
            log.warning("%s", exc)
            return None
