"""``POST /webhooks/payments``: verify a Payments Service delivery, keep it in the inbox, then answer.

A delivery is answered 2xx only after its envelope is committed to the webhook inbox of the payops database
(`store.webhook_inbox`, keyed by webhook id: a retry or replay is answered ``duplicate``). The relay
(`tasks.events.event_relay`, started with the console) turns the rows the forward filter selects into the same
Prefect event as the events catch-up (`tasks.events.payment_events`) and marks them forwarded once Prefect has
them. When the relay falls behind (more than ``backlog_limit`` rows waiting), new deliveries are answered 503
with ``Retry-After``: the service retries six times over a day, so nothing is accepted that cannot be kept.

Verification and the database work run in a worker thread, off the event loop. Every delivery logs one line
(webhook id, type, outcome; never the body) at INFO or above, whatever the root logger's level.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from payops.connectors.payments.models import WebhookEnvelope
from payops.connectors.payments.webhooks import WebhookVerificationError, WebhookVerifier
from payops.store import open_database
from payops.store.webhook_inbox import GroupCommit, WebhookInbox
from payops.tasks.events.event_relay import EmitterSender, PrefectEventsSender, Relay
from payops.tasks.events.payment_events import Emitter, ForwardFilter, default_emitter, envelope_to_event
from starlette.concurrency import run_in_threadpool

from .settings import ConsoleSettings

__all__ = [
    "Emitter",
    "WebhookReceiver",
    "WebhookService",
    "default_emitter",
    "prefect_event",
    "webhook_router",
]

log = logging.getLogger("payops.console.webhooks")

MAX_BODY_BYTES = 1024 * 1024
BACKLOG_CHECK_S = 0.5  # how stale the backlog count may be: one COUNT per half second, not per delivery


Answer = tuple[int, dict[str, str], dict[str, str]]  # status code, JSON answer, extra headers


@dataclass(frozen=True)
class Verified:
    """A delivery that passed verification and backpressure: what the inbox keeps."""

    envelope: WebhookEnvelope
    wire: dict[str, Any]
    forward: bool


def prefect_event(envelope: WebhookEnvelope) -> dict[str, Any]:
    """Keyword arguments of ``emit_event`` for a verified envelope."""
    return envelope_to_event(envelope)


class WebhookReceiver:
    """Verification (with rotation), the inbox commit, duplicates and backpressure, independent of HTTP."""

    def __init__(
        self,
        secrets: list[str],
        inbox: WebhookInbox,
        forward: ForwardFilter | None = None,
        *,
        backlog_limit: int = 20_000,
        retry_after_s: int = 60,
    ) -> None:
        self.verifier = WebhookVerifier(secrets) if secrets else None
        self.inbox = inbox
        self.writer = GroupCommit(inbox, on_commit=self._log_committed)
        self.forward = forward or ForwardFilter()
        self.backlog_limit = backlog_limit
        self.retry_after_s = retry_after_s
        self.on_accept: Callable[[], None] = lambda: (
            None
        )  # wakes the relay for a forwarded row (set by the app)
        self._backlog = 0
        self._backlog_at = 0.0
        self._lock = threading.Lock()

    def over_limit(self) -> bool:
        """Whether the unforwarded backlog has reached the limit (count refreshed every `BACKLOG_CHECK_S`)."""
        with self._lock:
            if time.monotonic() - self._backlog_at >= BACKLOG_CHECK_S:
                self._backlog = self.inbox.backlog()
                self._backlog_at = time.monotonic()
            return self._backlog >= self.backlog_limit

    def _busy(self) -> tuple[int, dict[str, str], dict[str, str]]:
        return 503, {"error": "temporarily unavailable"}, {"Retry-After": str(self.retry_after_s)}

    def check(self, body: bytes, headers: dict[str, str]) -> Answer | Verified:
        """Verify a delivery and decide its fate short of the commit (blocking: call it in a thread)."""
        if self.verifier is None:
            log.warning("webhook delivery id=%s outcome=not-configured", headers.get("webhook-id", "?")[:80])
            return 503, {"error": "webhook receiver not configured"}, {}
        try:
            envelope = self.verifier.verify(body, headers)
        except WebhookVerificationError as exc:
            log.warning(
                "webhook delivery id=%s outcome=refused (%s)", headers.get("webhook-id", "?")[:80], exc
            )
            return 400, {"error": "invalid webhook"}, {}
        try:
            if self.over_limit():
                if envelope.id in self.inbox:
                    return self._answer(envelope, "duplicate")
                log.warning("webhook delivery id=%s type=%s outcome=busy", envelope.id, envelope.type)
                return self._busy()
        except Exception as exc:  # noqa: BLE001 - the database is unavailable: the service retries the 503
            return self._unavailable(envelope, exc)
        return Verified(envelope, envelope.model_dump(mode="json", by_alias=True), self.forward(envelope))

    def committed(self, verified: Verified, new: bool) -> Answer:
        """The answer once the inbox has the delivery (``new``: it was not there before; logged already)."""
        if new and verified.forward:
            with self._lock:
                self._backlog += 1
        outcome = "accepted" if new else "duplicate"
        return 200, {"status": outcome, "id": verified.envelope.id}, {}

    @staticmethod
    def _log_committed(results: list[tuple[dict[str, Any], bool]]) -> None:
        # In the writer thread, after the commit and before any of these deliveries is answered: the line is
        # written even when the process dies right after the answer, and never on the event loop (Prefect's
        # rich console handler is slow per line).
        for envelope, new in results:
            outcome = "accepted" if new else "duplicate"
            log.info("webhook delivery id=%s type=%s outcome=%s", envelope["id"], envelope["type"], outcome)

    def _answer(self, envelope: WebhookEnvelope, outcome: str) -> Answer:
        log.info("webhook delivery id=%s type=%s outcome=%s", envelope.id, envelope.type, outcome)
        return 200, {"status": outcome, "id": envelope.id}, {}

    def _unavailable(self, envelope: WebhookEnvelope, exc: Exception) -> Answer:
        log.error(
            "webhook delivery id=%s type=%s outcome=unavailable (%s)",
            envelope.id,
            envelope.type,
            type(exc).__name__,
        )
        return self._busy()

    def receive(self, body: bytes, headers: dict[str, str]) -> Answer:
        """Status code, JSON answer and extra headers for one delivery (blocking: call it in a thread)."""
        verified = self.check(body, headers)
        if not isinstance(verified, Verified):
            return verified
        try:
            new = self.writer.accept(verified.wire, verified.forward)
        except Exception as exc:  # noqa: BLE001 - the database is unavailable: the service retries the 503
            return self._unavailable(verified.envelope, exc)
        return self.committed(verified, new)

    async def receive_async(self, body: bytes, headers: dict[str, str]) -> Answer:
        """`receive` for the event loop: verification in a worker thread, then the loop awaits the commit.

        No thread waits on the group commit: at 64 concurrent deliveries the blocked threads of the
        synchronous path cost more CPU (GIL hand-offs) than the work itself.
        """
        verified = await run_in_threadpool(self.check, body, headers)
        if not isinstance(verified, Verified):
            return verified
        try:
            new = await asyncio.wrap_future(self.writer.submit(verified.wire, verified.forward))
        except Exception as exc:  # noqa: BLE001 - the database is unavailable: the service retries the 503
            return self._unavailable(verified.envelope, exc)
        answer = self.committed(verified, new)
        if new and verified.forward:
            self.on_accept()
        return answer


def webhook_router(receiver: WebhookReceiver) -> APIRouter:
    router = APIRouter()
    log.setLevel(logging.INFO)  # one line per delivery even when the root logger is at WARNING

    async def payments_webhook(request: Request) -> JSONResponse:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return JSONResponse({"error": "body too large"}, status_code=413)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return JSONResponse({"error": "body too large"}, status_code=413)
        status, answer, headers = await receiver.receive_async(body, dict(request.headers))
        return JSONResponse(answer, status_code=status, headers=headers)

    # A plain Starlette route: the endpoint reads the raw request itself, so FastAPI's per-request dependency
    # solving would be pure cost on the receiver's hot path (it runs on the event loop).
    router.add_route("/webhooks/payments", payments_webhook, methods=["POST"], include_in_schema=False)
    return router


class WebhookService:
    """The receiver, its inbox and the relay of one console process; `lifespan` runs the relay."""

    def __init__(self, settings: ConsoleSettings, emitter: Emitter = default_emitter) -> None:
        self.engine = open_database(settings)  # the process's engine, shared with the console's routes
        self.inbox = WebhookInbox(self.engine)
        self.receiver = WebhookReceiver(
            settings.webhook_secret_list(),
            self.inbox,
            ForwardFilter(settings.webhook_forward),
            backlog_limit=settings.webhook_backlog_limit,
            retry_after_s=settings.webhook_retry_after_s,
        )
        sender = PrefectEventsSender() if emitter is default_emitter else EmitterSender(emitter)
        self.relay = Relay(self.inbox, sender, lease_s=settings.webhook_lease_s)

    @asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        """Run the relay beside the app; on shutdown stop it, close the Prefect client and the engine."""
        self.receiver.on_accept = self.relay.wake.set
        task = asyncio.create_task(self.relay.run(), name="webhook-relay")
        try:
            yield
        finally:
            self.relay.stop()
            await task
            await asyncio.to_thread(self.receiver.writer.close)
            await self.relay.sender.aclose()
            self.engine.dispose()
