"""Logging in and out, and the health check."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ..deps import ConsoleDep, Form, Viewer
from ..errors import ConsoleError
from ..state import SESSION_COOKIE

log = logging.getLogger("payops.console")
router = APIRouter()


@router.get("/healthz", include_in_schema=False)
async def healthz(console: ConsoleDep) -> JSONResponse:
    return JSONResponse({"status": "ok", "mode": console.launcher.mode})


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, console: ConsoleDep) -> Response:
    if await console.account(request):
        return RedirectResponse("/", status_code=303)
    return await console.render(request, "login.html", {})


@router.post("/login")
async def login(request: Request, console: ConsoleDep, form: Form) -> Response:
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


@router.post("/logout")
async def logout(request: Request, console: ConsoleDep, account: Viewer, form: Form) -> Response:
    await asyncio.to_thread(console.users.end_session, request.cookies.get(SESSION_COOKIE))
    console.audit(request, account.name, "logout", f"user:{account.name}")
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
