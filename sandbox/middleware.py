"""One ASGI middleware for what wraps every request: Request-Id, environment prefix, stats, latency, faults.

* ``Request-Id`` header on every response, including crashes (answered 500 ``internal server error``).
* ``/test/v1/...`` and ``/live/v1/...`` serve the API for one environment only: a credential of the other
  environment gets 403 ``environment_mismatch``. Plain ``/v1/...`` serves the token's environment.
* Faults (seeded): a share of ``/v1`` requests is answered 500/502/503/504; a 504 on a POST can come after
  the request was committed (the answer is lost; a replay with the same key returns the stored result).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import SERVED_ENV_KEY
from .errors import INTERNAL_MESSAGE
from .idempotency import render
from .runtime import Sandbox

log = logging.getLogger("payops.sandbox")

FAULT_CODES = {500: "internal", 502: "internal", 503: "environment_unknown", 504: "upstream_timeout"}


def _error_message(status: int, code: str, request_id: str) -> tuple[Message, Message]:
    body = render({"error": {"code": code, "message": INTERNAL_MESSAGE}})
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"request-id", request_id.encode()),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class SandboxMiddleware:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, sandbox: Sandbox) -> None:
        self.app = app
        self.sandbox = sandbox

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = f"req_{uuid.uuid4().hex}"
        path: str = scope["path"]
        for env in ("test", "live"):
            prefix = f"/{env}/v1/"
            if path.startswith(prefix):
                scope[SERVED_ENV_KEY] = env
                scope["path"] = path = path[len(env) + 1 :]
                scope["raw_path"] = path.encode()
                break
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"request-id"]
                message = {**message, "headers": [*headers, (b"request-id", request_id.encode())]}
            await send(message)

        is_api = path.startswith("/v1/") or (
            self.sandbox.config.fault_token_endpoint and path.startswith("/auth/")
        )
        try:
            fault = self.sandbox.faults.draw(scope["method"]) if is_api else None
            if fault is not None and not fault[1]:
                self._count(scope, f"fault {fault[0]}")
                for message in _error_message(fault[0], FAULT_CODES[fault[0]], request_id):
                    await send(message)
                return
            if is_api and scope["method"] != "POST" and self.sandbox.config.latency_ms:
                await asyncio.sleep(self.sandbox.config.latency_ms / 1000)
            if fault is not None:
                await self._lose_answer(scope, receive, send, request_id)
                return
            await self.app(scope, receive, send_with_id)
            self._count(scope)
        except Exception:
            log.exception("sandbox request %s %s crashed", scope["method"], path)
            if started:
                raise
            for message in _error_message(500, "internal", request_id):
                await send(message)

    async def _lose_answer(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        """Run the request to completion (its effect is committed), then answer 504 instead."""

        async def swallow(_message: Message) -> None:
            return None

        await self.app(scope, receive, swallow)
        self._count(scope, "fault 504 after commit")
        for message in _error_message(504, "upstream_timeout", request_id):
            await send(message)

    def _count(self, scope: Scope, extra: str | None = None) -> None:
        route: Any = scope.get("route")
        template = getattr(route, "path", None) or scope["path"]
        self.sandbox.state.requests[f"{scope['method']} {template}"] += 1
        if extra:
            self.sandbox.state.requests[extra] += 1
