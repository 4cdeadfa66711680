"""Admin pages: users (add, disable, enable, reset password), approval rules, the audit trail (CSV export)."""

from __future__ import annotations

import asyncio
import csv
import io
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from store.approvals import parse_tiers
from store.audit import search
from store.users import PASSWORD_RULE, ROLES, UserError
from tasks.xlsx import neutralise

from .errors import ConsoleError

if TYPE_CHECKING:
    from .app import Console

AUDIT_PAGE_ROWS = 500
AUDIT_COLUMNS = ["seq", "at", "actor", "client", "action", "object", "detail", "hash"]


def _text(form: Any, name: str, limit: int = 200) -> str:
    value = form.get(name)
    return value.strip()[:limit] if isinstance(value, str) else ""


def _filters(request: Request) -> dict[str, str | None]:
    q = request.query_params
    return {k: (q.get(k) or "").strip()[:64] or None for k in ("actor", "action", "text")}


def register_admin(app: FastAPI, console: Console) -> None:
    """Add the admin routes (all need the ``admin`` role)."""

    async def users_page(request: Request, error: str | None = None, status: int = 200) -> Response:
        users = await asyncio.to_thread(console.users.all)
        context = {"users": users, "roles": ROLES, "password_rule": PASSWORD_RULE, "error": error}
        return await console.render(request, "users.html", context, status=status)

    @app.get("/admin/users", response_class=HTMLResponse)
    async def list_users(request: Request) -> Response:
        await console.require(request, "admin")
        return await users_page(request)

    @app.post("/admin/users")
    async def add_user(request: Request) -> Response:
        admin = await console.require(request, "admin")
        form = await request.form(max_files=0, max_fields=6)
        await console.check_csrf(request, form)
        name, role = _text(form, "username", 64).lower(), _text(form, "role", 16)
        try:
            await asyncio.to_thread(console.users.add, name, role, _text(form, "password", 1024))
        except UserError as exc:
            return await users_page(request, str(exc), 400)
        console.audit(request, admin.name, "user.added", f"user:{name}", role=role)
        return RedirectResponse("/admin/users", status_code=303)

    @app.post("/admin/users/{name}/{action}")
    async def change_user(request: Request, name: str, action: str) -> Response:
        admin = await console.require(request, "admin")
        form = await request.form(max_files=0, max_fields=4)
        await console.check_csrf(request, form)
        try:
            if action in ("disable", "enable"):
                if name == admin.name and action == "disable":
                    raise UserError("you cannot disable your own account")
                await asyncio.to_thread(console.users.set_disabled, name, action == "disable")
            elif action == "password":
                await asyncio.to_thread(console.users.reset_password, name, _text(form, "password", 1024))
            else:
                raise ConsoleError(404, "No such page.")
        except UserError as exc:
            return await users_page(request, str(exc), 400)
        event = {"disable": "user.disabled", "enable": "user.enabled", "password": "user.password_reset"}
        console.audit(request, admin.name, event[action], f"user:{name}")
        return RedirectResponse("/admin/users", status_code=303)

    @app.get("/admin/rules", response_class=HTMLResponse)
    async def rules_page(request: Request) -> Response:
        await console.require(request, "admin")
        rule = await asyncio.to_thread(console.approvals.rule)
        key = await console.approval_key()
        return await console.render(request, "rules.html", {"rule": rule, "key_configured": key is not None})

    @app.post("/admin/rules")
    async def set_rules(request: Request) -> Response:
        admin = await console.require(request, "admin")
        form = await request.form(max_files=0, max_fields=3)
        await console.check_csrf(request, form)
        try:
            rule = parse_tiers(_text(form, "tiers", 500))
        except UserError as exc:
            raise ConsoleError(400, str(exc)) from None
        await asyncio.to_thread(console.approvals.set_rule, rule)
        console.audit(request, admin.name, "rules.changed", "rules:approval", tiers=rule.describe())
        return RedirectResponse("/admin/rules", status_code=303)

    @app.get("/admin/audit", response_class=HTMLResponse)
    async def audit_page(request: Request) -> Response:
        await console.require(request, "admin")
        filters = _filters(request)
        entries = await asyncio.to_thread(search, console.engine, limit=AUDIT_PAGE_ROWS, **filters)
        query = urlencode({k: v for k, v in filters.items() if v})
        return await console.render(
            request, "audit.html", {"entries": entries, "filters": filters, "query": query}
        )

    @app.get("/admin/audit.csv")
    async def audit_csv(request: Request) -> Response:
        admin = await console.require(request, "admin")
        filters = _filters(request)
        entries = await asyncio.to_thread(search, console.engine, limit=None, **filters)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(AUDIT_COLUMNS)
        for e in entries:
            row = [e.seq, e.at.isoformat(), e.actor, e.client, e.action, e.object, e.detail, e.hash]
            writer.writerow([neutralise(v) if isinstance(v, str) else v for v in row])
        console.audit(request, admin.name, "audit.exported", "audit:csv", rows=len(entries))
        return Response(
            out.getvalue(),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="payops-audit.csv"'},
        )
