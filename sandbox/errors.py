"""The error object of the spec (``ApiError``) and its rendering; ``error_handlers`` maps failures to it."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

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
