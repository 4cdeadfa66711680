"""``POST /webhooks/payments``: verify a Payments Service delivery, skip duplicates, emit a Prefect event.

The envelope becomes the same Prefect event as in the events catch-up (``tasks.payment_events``): event
``payments.<type>`` about the resource ``payments.<kind>.<reference>`` with ``payments.status`` /
``payments.outcome`` labels for deployment triggers, payload = the envelope's ``data``, and an event id
derived from the webhook id, so a replay or a catch-up of the same envelope is the same event.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from connectors.payments.models import WebhookEnvelope
from connectors.payments.webhooks import WebhookVerificationError, WebhookVerifier
from tasks.payment_events import Emitter, default_emitter, envelope_to_event

from .seen_events import SeenEvents

__all__ = ["Emitter", "WebhookReceiver", "default_emitter", "prefect_event", "webhook_router"]

log = logging.getLogger("payops.console.webhooks")

MAX_BODY_BYTES = 1024 * 1024


def prefect_event(envelope: WebhookEnvelope) -> dict[str, Any]:
    """Keyword arguments of ``emit_event`` for a verified envelope."""
    return envelope_to_event(envelope)


class WebhookReceiver:
    """Verification (with rotation), duplicate skipping and emission, independent of HTTP."""

    def __init__(self, secrets: list[str], seen: SeenEvents, emitter: Emitter = default_emitter) -> None:
        self.verifier = WebhookVerifier(secrets) if secrets else None
        self.seen = seen
        self.emitter = emitter

    def receive(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
        """Status code and JSON answer for one delivery."""
        if self.verifier is None:
            return 503, {"error": "webhook receiver not configured"}
        try:
            envelope = self.verifier.verify(body, headers)
        except WebhookVerificationError as exc:
            log.warning("webhook refused: %s", exc)
            return 400, {"error": "invalid webhook"}
        if not self.seen.claim(envelope.id):
            log.info("webhook %s (%s) already processed: skipped", envelope.id, envelope.type)
            return 200, {"status": "duplicate", "id": envelope.id}
        try:
            self.emitter(**prefect_event(envelope))
        except Exception as exc:  # noqa: BLE001 - answer 503 so the service retries; the claim is given back
            self.seen.release(envelope.id)
            log.error("webhook %s: emitting the Prefect event failed (%s)", envelope.id, type(exc).__name__)
            return 503, {"error": "temporarily unavailable"}
        log.info("webhook %s (%s) emitted", envelope.id, envelope.type)
        return 200, {"status": "accepted", "id": envelope.id}


def webhook_router(receiver: WebhookReceiver) -> APIRouter:
    router = APIRouter()

    @router.post("/webhooks/payments", include_in_schema=False)
    async def payments_webhook(request: Request) -> JSONResponse:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return JSONResponse({"error": "body too large"}, status_code=413)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return JSONResponse({"error": "body too large"}, status_code=413)
        status, answer = receiver.receive(body, dict(request.headers))
        return JSONResponse(answer, status_code=status)

    return router
