"""Exception handlers: every failure (refusal, bad request, crash) answered as the spec's error object."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .auth import token_problem
from .errors import INTERNAL_MESSAGE, ApiError, error_response, field_path

log = logging.getLogger("payops.sandbox")


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
