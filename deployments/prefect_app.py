"""The Prefect server (API and UI) ``payops serve`` runs: Prefect's own app, run as ``prefect server start``
runs it, behind one addition, :class:`RetryWhenBusy`.

Why: on SQLite, Prefect answers 503 "Service Unavailable" when a request's transaction meets another
writer (``SQLITE_BUSY_SNAPSHOT``: a read-then-write transaction whose snapshot went stale fails at once,
whatever the busy timeout). Prefect's own client retries every 503 (``PREFECT_CLIENT_MAX_RETRIES``), but
Prefect's UI does not: an operator pressing Submit on the Custom run form while two runs write their task
states got "Service Unavailable" (seen in CI). The server now gives every request the retry the client
already gives itself, so the UI's requests get it too.

Hand-rolled (a small ASGI wrapper): neither Prefect nor Starlette offers a server-side retry of a request;
it is safe for the same reason the client's retry is: Prefect answers 503 only for the retryable database
errors of ``prefect.server.api.server.is_client_retryable_exception``, raised before its transaction commits.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

logger = logging.getLogger(__name__)

BUSY_STATUS = 503
PAUSES_S = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
"""The pauses before each retry of a busy answer (with up to 50% jitter): about 8 s in all, the last
answer passed on as it is."""


class RetryWhenBusy:
    """ASGI middleware: an HTTP request answered 503 is run again, its body replayed, after each of
    ``pauses`` (seconds); nothing of a 503 reaches the client until the last attempt."""

    def __init__(
        self,
        app: ASGIApp,
        pauses: tuple[float, ...] = PAUSES_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.app = app
        self.pauses = pauses
        self.sleep = sleep

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:  # the client left while sending
            return
        for attempt in range(len(self.pauses) + 1):
            last = attempt == len(self.pauses)
            # a copy per attempt: routing writes into the scope (a Mount's root_path and path), and a second
            # attempt on the first one's scope finds no route (404)
            busy = await self._attempt(dict(scope), _replay(body, receive), send, may_retry=not last)
            if not busy:
                return
            pause = self.pauses[attempt]
            await self.sleep(pause * (1 + random.random() / 2))

    async def _attempt(
        self, scope: MutableMapping[str, Any], receive: Receive, send: Send, may_retry: bool
    ) -> bool:
        """Run the app once; True when it answered 503 and the answer was held back for a retry."""
        held = False

        async def hold_busy(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message["status"] == BUSY_STATUS and may_retry:
                held = True
            if not held:
                await send(message)

        try:
            await self.app(scope, receive, hold_busy)
        except Exception:
            # Starlette re-raises what an exception handler answered (for the server's log): a held 503's
            # database error is logged here and retried; anything else goes on as before.
            if not held:
                raise
            logger.info("busy database answered 503 to %s %s; retrying", scope["method"], scope["path"])
        return held


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body (Prefect reads each request's JSON whole anyway); None on a disconnect."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then waits on the client's own (for its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def create_app() -> ASGIApp:
    """Prefect's server app as ``prefect server start`` builds it (final, with its services and UI, as the
    environment's Prefect settings say), behind :class:`RetryWhenBusy`."""
    from prefect.server.api.server import create_app as prefect_app

    return RetryWhenBusy(prefect_app(final=True))


def main() -> None:
    """Serve :func:`create_app` on ``PREFECT_SERVER_API_HOST:PORT`` with ``prefect server start``'s
    uvicorn options (keep-alive and log level from Prefect's settings)."""
    import uvicorn
    from prefect.settings import (
        PREFECT_SERVER_API_HOST,
        PREFECT_SERVER_API_KEEPALIVE_TIMEOUT,
        PREFECT_SERVER_API_PORT,
        PREFECT_SERVER_LOGGING_LEVEL,
    )

    uvicorn.run(
        app=create_app(),
        host=PREFECT_SERVER_API_HOST.value(),
        port=PREFECT_SERVER_API_PORT.value(),
        timeout_keep_alive=PREFECT_SERVER_API_KEEPALIVE_TIMEOUT.value(),
        log_level=str(PREFECT_SERVER_LOGGING_LEVEL.value()).lower(),
    )


if __name__ == "__main__":
    main()
