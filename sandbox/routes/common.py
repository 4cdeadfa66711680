"""Shared bits of the routers: documented error responses, paths, cursors, clock access."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated, Any

from fastapi import Path
from payops.connectors.payments.models import REFERENCE_PATTERN, ErrorBody

from ..errors import invalid

_DESCRIPTIONS = {
    400: "Invalid input (`invalid_input`), message names the field",
    401: "Token missing, invalid or expired (`unauthenticated`)",
    403: "Forbidden, environment mismatch, business suspended/deactivated, limits, balance",
    404: "Not found in this environment (`not_found`)",
    409: "Idempotency or reference conflict",
    422: "Cannot be done as the setup stands",
    429: "Rate limited (`rate_limited`, Retry-After)",
    500: "internal server error",
    502: "internal server error",
    503: "internal server error",
    504: "internal server error (a POST may or may not have run)",
}
COMMON = (400, 401, 403, 429, 500, 502, 503, 504)


def error_responses(*extra: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the common error statuses plus ``extra``."""
    return {s: {"model": ErrorBody, "description": _DESCRIPTIONS[s]} for s in sorted({*COMMON, *extra})}


ReferencePath = Annotated[str, Path(pattern=REFERENCE_PATTERN, description="The caller's reference")]


def encode_cursor(seq: int) -> str:
    """Opaque cursor for the item after ``seq`` (newest-first lists)."""
    return base64.urlsafe_b64encode(f"v1:{seq}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """``seq`` of the last item of the previous page (400 ``invalid_input`` when malformed)."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, number = text.partition(":")
        seq = int(number)
        if prefix != "v1" or seq < 1:
            raise ValueError(cursor)
        return seq
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid("cursor", "not a cursor returned by this list") from None


def aware(moment: datetime | None) -> datetime | None:
    """Treat a naive query datetime as UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    from datetime import UTC

    return moment.replace(tzinfo=UTC)
