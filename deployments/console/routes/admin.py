"""Admin pages: users (add, disable, enable, reset password), the approval policy, the audit trail (CSV)."""

from __future__ import annotations

import asyncio
import csv
import io
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from payops.store.approvals import parse_policy
from payops.store.audit import search
from payops.store.users import PASSWORD_RULE, ROLES, UserError
from payops.tasks.reports.xlsx import neutralise
from starlette.datastructures import FormData

from ..deps import Admin, ConsoleDep, checked_form, text
from ..errors import ConsoleError
from ..state import Console

router = APIRouter(prefix="/admin")
AUDIT_PAGE_ROWS = 500
AUDIT_COLUMNS = ["seq", "at", "actor", "client", "action", "object", "detail", "hash"]
UserForm = Annotated[FormData, Depends(checked_form(max_fields=6))]
SmallForm = Annotated[FormData, Depends(checked_form(max_fields=4))]


def _filters(request: Request) -> dict[str, str | None]:
    q = request.query_params
    return {k: (q.get(k) or "").strip()[:64] or None for k in ("actor", "action", "text")}


async def _users_page(
    request: Request, console: Console, error: str | None = None, status: int = 200
) -> Response:
    users = await asyncio.to_thread(console.users.all)
    context = {"users": users, "roles": ROLES, "password_rule": PASSWORD_RULE, "error": error}
    return await console.render(request, "users.html", context, status=status)


@router.get("/users", response_class=HTMLResponse)
async def list_users(request: Request, console: ConsoleDep, admin: Admin) -> Response:
    return await _users_page(request, console)


@router.post("/users")
async def add_user(request: Request, console: ConsoleDep, admin: Admin, form: UserForm) -> Response:
    name, role = text(form, "username", 64).lower(), text(form, "role", 16)
    try:
        await asyncio.to_thread(console.users.add, name, role, text(form, "password", 1024))
    except UserError as exc:
        return await _users_page(request, console, str(exc), 400)
    console.audit(request, admin.name, "user.added", f"user:{name}", role=role)
    return RedirectResponse("/admin/users", status_code=303)


@router.post("/users/{name}/{action}")
async def change_user(
    request: Request, name: str, action: str, console: ConsoleDep, admin: Admin, form: SmallForm
) -> Response:
    try:
        if action in ("disable", "enable"):
            if name == admin.name and action == "disable":
                raise UserError("you cannot disable your own account")
            await asyncio.to_thread(console.users.set_disabled, name, action == "disable")
        elif action == "password":
            await asyncio.to_thread(console.users.reset_password, name, text(form, "password", 1024))
        elif action in ("prefect-login", "prefect-login-revoke"):
            await asyncio.to_thread(console.users.set_prefect_login, name, action == "prefect-login")
        else:
            raise ConsoleError(404, "No such page.")
    except UserError as exc:
        return await _users_page(request, console, str(exc), 400)
    event = {
        "disable": "user.disabled",
        "enable": "user.enabled",
        "password": "user.password_reset",
        "prefect-login": "user.prefect_login_granted",
        "prefect-login-revoke": "user.prefect_login_revoked",
    }
    console.audit(request, admin.name, event[action], f"user:{name}")
    return RedirectResponse("/admin/users", status_code=303)


@router.get("/rules", response_class=HTMLResponse)
async def rules_page(request: Request, console: ConsoleDep, admin: Admin) -> Response:
    return await _rules_page(request, console)


async def _rules_page(
    request: Request, console: Console, error: str | None = None, typed: str | None = None
) -> Response:
    """The policy page; after a refused change, with the error and what the admin typed, to correct."""
    policy = await asyncio.to_thread(console.approvals.policy)
    key = await console.approval_key()
    context = {"policy": policy, "key_configured": key is not None, "error": error, "typed": typed}
    return await console.render(request, "rules.html", context, status=400 if error else 200)


@router.post("/rules")
async def set_rules(request: Request, console: ConsoleDep, admin: Admin, form: SmallForm) -> Response:
    typed = text(form, "tiers", 1000)
    try:
        policy = parse_policy(typed)
    except UserError as exc:
        return await _rules_page(request, console, str(exc), typed)
    await asyncio.to_thread(console.approvals.set_policy, policy)
    console.audit(request, admin.name, "rules.changed", "rules:approval", tiers=policy.describe())
    return RedirectResponse("/admin/rules", status_code=303)


@router.get("/audit", response_class=HTMLResponse)
async def audit_page(request: Request, console: ConsoleDep, admin: Admin) -> Response:
    filters = _filters(request)
    entries = await asyncio.to_thread(search, console.engine, limit=AUDIT_PAGE_ROWS, **filters)
    query = urlencode({k: v for k, v in filters.items() if v})
    return await console.render(
        request, "audit.html", {"entries": entries, "filters": filters, "query": query}
    )


@router.get("/audit.csv")
async def audit_csv(request: Request, console: ConsoleDep, admin: Admin) -> Response:
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
