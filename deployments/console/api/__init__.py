"""The payops server's JSON API, version 1: the front door for people who do not use the console's pages.

Mounted by the console app at :data:`API_PREFIX`, beside its pages: the same state (database, launcher,
approval key, audit), the same roles (`store.users.PERMISSIONS`), checked on the server for every call. The
CLI is its client when it knows a server (`deployments/cli/front_door.py`). Its OpenAPI document is published
at ``/api/v1/openapi.json`` and kept in the repository (``openapi.json`` here; a test holds the app to it):
``python -m payops.deployments.console.api`` writes it again after a change.
"""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from .errors import ApiError

if TYPE_CHECKING:
    from ..state import Console

API_PREFIX = "/api/v1"
CONTRACT = Path(__file__).with_name("openapi.json")
log = logging.getLogger("payops.console.api")


def _answer(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status)


def create_api(console: Console | None) -> FastAPI:
    """The API app on ``console``'s state (None: the app alone, for its OpenAPI document)."""
    from . import people, reconciliation, runs

    api = FastAPI(
        title="payops server API",
        version="1",
        summary="Pay payout sheets, approve runs, manage users, tokens, the approval policy and the audit "
        "trail: the front door of a payops installation.",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    api.state.console = console
    api.include_router(people.router)
    api.include_router(runs.router)
    api.include_router(reconciliation.router)

    @api.exception_handler(ApiError)
    async def refused(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Bearer realm="payops"'} if exc.status == 401 else None
        response = _answer(exc.status, exc.message)
        if headers:
            response.headers.update(headers)
        return response

    @api.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}" for e in exc.errors()
        )
        return _answer(422, problems[:2000])

    @api.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        ref = secrets.token_hex(4)
        log.error("api error %s on %s %s", ref, request.method, request.url.path, exc_info=exc)
        return _answer(500, f"something went wrong on the server (reference {ref}; details in its log)")

    return api


def contract() -> dict:
    """The API's OpenAPI document as the app makes it."""
    api = create_api(None)
    document = api.openapi()
    document["servers"] = [{"url": API_PREFIX}]
    return document


def write_contract(path: Path = CONTRACT) -> Path:
    path.write_text(json.dumps(contract(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


__all__ = ["API_PREFIX", "ApiError", "contract", "create_api", "write_contract"]
