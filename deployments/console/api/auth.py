"""Who calls the JSON API: a personal API token (``Authorization: Bearer pyo_...``) or, for one call, a user
name and password (``Authorization: Basic``, throttled like the login page). Never a session cookie: the API
reads no ambient credential, so it needs no CSRF token.

A route declares the role it needs (``ApiViewer``, ``ApiOperator``, ``ApiApprover``, ``ApiAdmin``); the check
runs on the server for every call, with the same table the console's pages use (`store.users.PERMISSIONS`).
A refusal is audited (``payops.login.failed`` or ``payops.access.denied``) and answered in one line.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Annotated

from fastapi import Depends, Request
from payops.store.users import PERMISSIONS, Account, User

from ..deps import ConsoleDep
from ..state import Console
from .errors import ApiError

API_CLIENT = "api"


def _basic(header: str) -> tuple[str, str] | None:
    try:
        raw = base64.b64decode(header, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, sep, password = raw.partition(":")
    return (name.strip().lower()[:64], password) if sep else None


async def _by_password(console: Console, request: Request, name: str, password: str) -> User | None:
    client = console.client(request)
    if not console.throttle.reserve(client, name):
        console.audit(request, name, "login.throttled", f"user:{name}", via=API_CLIENT)
        raise ApiError(429, "too many failed logins: wait a few minutes")
    user = None
    try:
        if name and password:
            user = await asyncio.to_thread(console.users.authenticate, name, password)
    finally:
        console.throttle.settle(client, name, user is not None)
    if user is None:
        console.audit(request, name, "login.failed", f"user:{name}", via=API_CLIENT)
    return user


async def api_account(request: Request, console: ConsoleDep) -> Account:
    """The account behind the request's ``Authorization`` header; 401 without a valid one."""
    if hasattr(request.state, "api_account"):
        return request.state.api_account
    scheme, _, value = (request.headers.get("authorization") or "").strip().partition(" ")
    scheme, value = scheme.lower(), value.strip()
    user: User | None = None
    if scheme == "bearer" and value:
        user = await asyncio.to_thread(console.users.authenticate_token, value)
        if user is None:
            console.audit(request, "(token)", "login.failed", "user:(token)", via="token")
            raise ApiError(401, "the API token is unknown, revoked or its user disabled: payops login")
    elif scheme == "basic" and (credentials := _basic(value)) is not None:
        user = await _by_password(console, request, *credentials)
        if user is None:
            raise ApiError(401, "wrong user name or password (or the user is disabled)")
    else:
        raise ApiError(401, "who are you? log in first (payops login) or send a personal API token")
    account = Account(user.id, user.name, user.role, session="")
    request.state.api_account = account
    return account


def api_need(permission: str):  # noqa: ANN201 - a FastAPI dependency
    """A dependency: the caller, allowed ``permission``; else 403, audited."""

    async def allowed(
        request: Request, console: ConsoleDep, account: Annotated[Account, Depends(api_account)]
    ) -> Account:
        if account.role not in PERMISSIONS[permission]:
            console.audit(
                request,
                account.name,
                "access.denied",
                f"api:{request.method} {request.url.path}",
                role=account.role,
            )
            allowed_roles = " or ".join(sorted(PERMISSIONS[permission]))
            raise ApiError(403, f"{account.name} is {account.role}; this needs the role {allowed_roles}")
        return account

    return allowed


ApiCaller = Annotated[Account, Depends(api_account)]
ApiViewer = Annotated[Account, Depends(api_need("view"))]
ApiOperator = Annotated[Account, Depends(api_need("upload"))]
ApiApprover = Annotated[Account, Depends(api_need("approve"))]
ApiAdmin = Annotated[Account, Depends(api_need("admin"))]
