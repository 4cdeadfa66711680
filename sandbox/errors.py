"""The error object of the spec, and the handlers that turn every failure into it."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("sandbox")

INTERNAL_MESSAGE = "internal server error"


class ApiError(Exception):
    """A refusal answered as ``{"error": {"code", "message"}}`` with ``status``.

    Any 5xx message is replaced by the fixed text ``internal server error``.
    """

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = INTERNAL_MESSAGE if status >= 500 else message
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The wire body."""
        return error_body(self.code, self.message)


def error_body(code: str, message: str) -> dict[str, Any]:
    """``{"error": {"code": code, "message": message}}``."""
    return {"error": {"code": code, "message": message}}


def invalid(field: str, problem: str) -> ApiError:
    """400 ``invalid_input`` naming ``field``."""
    return ApiError(400, "invalid_input", f"{field}: {problem}")


def not_found(what: str) -> ApiError:
    """404 ``not_found``."""
    return ApiError(404, "not_found", f"{what} not found in this environment")


def error_response(err: ApiError) -> JSONResponse:
    """Render an ``ApiError``."""
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


def field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "items", 3, "amount")`` → ``items[3].amount``; header names kept as sent."""
    parts = list(loc)
    if parts and parts[0] in {"body", "query", "path", "header", "cookie"}:
        source = parts.pop(0)
        if source == "header" and parts:
            return {"idempotency-key": "Idempotency-Key"}.get(str(parts[0]).lower(), str(parts[0]))
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def _validation_message(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "body: invalid request"
    first = errors[0]
    field = field_path(first.get("loc", ()))
    msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    if first.get("type") == "missing":
        msg = "field required"
    elif first.get("type") == "json_invalid":
        field, msg = "body", "malformed JSON"
    return f"{field}: {msg}"


def install_error_handlers(app: FastAPI) -> None:
    """Map ApiError, validation errors (→ 400 invalid_input), HTTP errors and crashes to the error object."""

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        from .auth import token_problem  # auth imports this module

        return error_response(
            token_problem(request) or ApiError(400, "invalid_input", _validation_message(exc))
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error_response(ApiError(404, "not_found", "no such endpoint"))
        if exc.status_code == 405:
            return error_response(ApiError(405, "method_not_allowed", "method not allowed"))
        code = "internal" if exc.status_code >= 500 else "invalid_input"
        return error_response(ApiError(exc.status_code, code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def _crash(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("sandbox request failed", exc_info=exc)
        return error_response(ApiError(500, "internal", INTERNAL_MESSAGE))
