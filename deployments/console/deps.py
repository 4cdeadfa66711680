"""FastAPI dependencies of the console's routes: the console state, the user and their role, the CSRF check.

A route declares what it needs (``Viewer``, ``Operator``, ``Approver``, ``Admin``; a ``checked_form``), and
FastAPI resolves it before the route runs: no route calls the checks by hand.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import Depends, Request
from payops.store.users import Account
from starlette.datastructures import FormData

from .errors import ConsoleError
from .state import Console


def console_of(request: Request) -> Console:
    return request.app.state.console


ConsoleDep = Annotated[Console, Depends(console_of)]


def need(permission: str) -> Callable[..., Awaitable[Account]]:
    """A dependency: the logged-in account allowed ``permission`` (store.users.PERMISSIONS)."""

    async def account(request: Request, console: ConsoleDep) -> Account:
        return await console.require(request, permission)

    return account


Viewer = Annotated[Account, Depends(need("view"))]
Operator = Annotated[Account, Depends(need("upload"))]
Approver = Annotated[Account, Depends(need("approve"))]
Admin = Annotated[Account, Depends(need("admin"))]


def checked_form(max_fields: int = 5, max_files: int = 0) -> Callable[..., Awaitable[FormData]]:
    """A dependency: the request's form (bounded), its CSRF token bound to this session or login nonce."""

    async def form(request: Request, console: ConsoleDep) -> FormData:
        data = await request.form(max_files=max_files, max_fields=max_fields)
        await console.check_csrf(request, data)
        return data

    return form


def size_within_limit(request: Request, console: ConsoleDep) -> None:
    """A dependency (before the form is read): refuse a body declared larger than the upload limit."""
    declared = request.headers.get("content-length")
    limit = console.settings.max_upload_bytes
    if declared and declared.isdigit() and int(declared) > limit + 64 * 1024:
        raise ConsoleError(413, f"The file is larger than {console.settings.max_upload_mb:g} MB.")


Form = Annotated[FormData, Depends(checked_form())]


def text(form: Any, name: str, limit: int = 200) -> str:
    """A form field as stripped text of at most ``limit`` characters ("" when absent or a file)."""
    value = form.get(name)
    return value.strip()[:limit] if isinstance(value, str) else ""


def parse_run_id(text: str) -> UUID:
    """A run id from a path; anything else is "no such run"."""
    try:
        return UUID(text)
    except ValueError:
        raise ConsoleError(404, "No such run.") from None
