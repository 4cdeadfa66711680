"""The Idempotency-Key layer shared by every POST, and the reference index behind duplicate_reference.

* same key + same body → the first answer replayed byte for byte (status and body);
* same key + different body (or another endpoint) → 409 ``idempotency_key_reused``;
* same key while the first request is still running → 409 ``request_in_flight``;
* answers below 500 are kept for the life of the process; a 5xx or crash forgets the key so it can be retried.

Keys are scoped per business and environment. Bodies are compared as canonical JSON (key order and
whitespace do not matter).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Annotated, Any

import orjson
from fastapi import Header, Request
from fastapi.responses import Response

from .auth import AuthContext
from .errors import ApiError
from .references import Outcome, fingerprint
from .runtime import get_sandbox
from .state import IdempotencyEntry, StoredAnswer

IdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="Required on every POST (1 to 255 characters); same key and body are answered once.",
    ),
]


def render(payload: Any) -> bytes:
    """The one JSON encoding used for every answer (so replays are byte-identical): compact UTF-8, by orjson
    (a listed page of 100 transactions: about a tenth of the stdlib's time, which was a fifth of the
    emulator's CPU per page when the ledger reads 1,000 pages at once)."""
    return orjson.dumps(payload)


def json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    """A JSON response from ``render``."""
    return Response(render(payload), status_code=status, media_type="application/json", headers=headers)


async def run_idempotent(
    request: Request, ctx: AuthContext, key: str, effect: Callable[[], Outcome]
) -> Response:
    """Answer a POST once per key: run ``effect`` under the state lock, store and return its answer."""
    sandbox = get_sandbox(request)
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode("utf-8", "replace")
    fp = fingerprint(request.method, request.url.path, body)
    store = ctx.env.idempotency
    with sandbox.state.lock:
        entry = store.get(key)
        if entry is not None:
            if entry.fingerprint != fp:
                raise ApiError(
                    409, "idempotency_key_reused", "Idempotency-Key was used before with a different body"
                )
            if entry.answer is None:
                raise ApiError(
                    409, "request_in_flight", "a request with this Idempotency-Key is still processing"
                )
            return Response(entry.answer.body, status_code=entry.answer.status, media_type="application/json")
        entry = store[key] = IdempotencyEntry(fingerprint=fp)
    try:
        if sandbox.config.latency_ms:
            await asyncio.sleep(sandbox.config.latency_ms / 1000)
        with sandbox.state.lock:
            sandbox.state.advance(ctx.env)
            try:
                status, payload = effect()
            except ApiError as err:
                if err.status >= 500:
                    raise
                status, payload = err.status, err.body()
            entry.answer = StoredAnswer(status, render(payload))
    except BaseException:
        with sandbox.state.lock:
            store.pop(key, None)
        raise
    return Response(entry.answer.body, status_code=entry.answer.status, media_type="application/json")
