"""The one retry policy of the client: pure functions, table-tested.

Spec (Errors → Retry rules): retry 429 and 5xx after a delay; for 429 wait at least ``Retry-After`` and
back off further each time; never retry 400, 401 (a new token is handled by the auth flow), 403, 404;
503 ``checkout_unavailable`` is not retried. 409 ``request_in_flight`` ("retry shortly") is retried after
a short pause. Timeouts and connection errors are retried with back-off (every POST carries a fixed
Idempotency-Key, so a repeat is answered once).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from .errors import is_transient_status, parse_retry_after

__all__ = ["should_retry", "delay", "TRANSPORT_TIMEOUT", "TRANSPORT_CONNECT", "IDEMPOTENT_METHODS"]

TRANSPORT_TIMEOUT = "timeout"
TRANSPORT_CONNECT = "connect"
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_NEVER_RETRIED_5XX_CODES = frozenset({"checkout_unavailable"})
_IN_FLIGHT_CODE = "request_in_flight"


def should_retry(
    status: int | None,
    code: str | None,
    method: str,
    attempt: int,
    *,
    max_retries: int,
    transport_error: str | None = None,
    has_idempotency_key: bool = True,
) -> bool:
    """Whether to send the request again.

    ``status`` is None when no response came (``transport_error`` is then ``"timeout"`` or ``"connect"``).
    ``attempt`` counts retries already made (0 after the first attempt). A POST without an
    Idempotency-Key is only repeated when nothing was processed (429, 409 in-flight, connect errors).
    """
    if attempt >= max_retries:
        return False
    replay_safe = has_idempotency_key or method.upper() in IDEMPOTENT_METHODS
    if status is None:
        return transport_error == TRANSPORT_CONNECT or (transport_error is not None and replay_safe)
    if status == 409:
        return code == _IN_FLIGHT_CODE
    if not is_transient_status(status):
        return False
    if status == 429:  # nothing was processed: safe to send again, key or not
        return True
    return code not in _NEVER_RETRIED_5XX_CODES and replay_safe


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """Case-insensitive header lookup on any mapping (dict or ``httpx.Headers``)."""
    if not headers:
        return None
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


def backoff(attempt: int, rng: random.Random, *, base: float, cap: float, jitter: float = 0.25) -> float:
    """Exponential back-off ``base * 2**attempt`` capped at ``cap``, minus up to ``jitter`` of it."""
    raw = min(cap, base * (2 ** max(0, attempt)))
    return raw * (1.0 - jitter * rng.random())


def delay(
    attempt: int,
    headers: Mapping[str, str] | None,
    rng: random.Random,
    *,
    status: int | None = None,
    code: str | None = None,
    base: float = 0.5,
    cap: float = 30.0,
    in_flight_pause: float = 0.2,
    now: float | None = None,
) -> float:
    """Seconds to sleep before retry number ``attempt + 1``.

    * 429: ``Retry-After`` (seconds or HTTP date) plus the growing back-off, so each wait is at least
      ``Retry-After`` and longer than the previous one for the same header.
    * 409 ``request_in_flight``: a short pause growing linearly (the first request is still running).
    * Otherwise (5xx, timeouts, connection errors): exponential back-off with jitter.
    """
    if status == 409 and code == _IN_FLIGHT_CODE:
        return in_flight_pause * (attempt + 1) * (1.0 + 0.25 * rng.random())
    wait = backoff(attempt, rng, base=base, cap=cap)
    if status == 429:
        retry_after = parse_retry_after(_header(headers, "Retry-After"), now=now)
        if retry_after is not None:
            return retry_after + wait
    return wait
