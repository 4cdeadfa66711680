"""Webhook verification (standardwebhooks), envelope parsing and duplicate skipping.

The spec signs ``<Webhook-Id>.<Webhook-Timestamp>.<raw body>`` with HMAC-SHA256 keyed by the signing
secret *exactly as issued*. ``standardwebhooks.Webhook`` base64-decodes a ``str`` secret (``whsec_``
convention) but uses ``bytes`` as the raw key, so secrets are passed as their UTF-8 bytes. Several
secrets can be given during rotation (the old one keeps verifying for 24 hours).
"""

from __future__ import annotations

import binascii
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from pydantic import ValidationError
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as _StdVerificationError

from .errors import PaymentsError
from .models import WebhookEnvelope

__all__ = [
    "WebhookVerificationError",
    "WebhookVerifier",
    "verify_webhook",
    "sign_webhook",
    "EventDeduplicator",
    "WEBHOOK_TOLERANCE_S",
]

WEBHOOK_TOLERANCE_S = 300  # enforced by standardwebhooks (5 minutes), as the spec requires


class WebhookVerificationError(PaymentsError):
    """The delivery is not authentic, too old/new, or malformed. Answer it with a 4xx."""


def _key(secret: str | bytes) -> bytes:
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    if not key:
        raise ValueError("webhook signing secret may not be empty")
    return key


class WebhookVerifier:
    """Verifies deliveries against one or more signing secrets (rotation) and parses the envelope."""

    def __init__(self, secrets: str | bytes | Iterable[str | bytes]) -> None:
        if isinstance(secrets, str | bytes):
            secrets = [secrets]
        self._webhooks = [Webhook(_key(s)) for s in secrets]
        if not self._webhooks:
            raise ValueError("at least one webhook signing secret is needed")

    def __repr__(self) -> str:
        return f"WebhookVerifier(secrets={len(self._webhooks)})"

    def verify(self, body: bytes, headers: Mapping[str, str]) -> WebhookEnvelope:
        """Check the signature (constant time) and the 5-minute timestamp window; return the envelope.

        Raises ``WebhookVerificationError`` when no secret verifies, headers are missing or malformed,
        the body is not a valid envelope, or the envelope ``id`` differs from ``Webhook-Id``.
        """
        plain = {k.lower(): v for k, v in headers.items()}
        last_reason = "no matching signature"
        for webhook in self._webhooks:
            try:
                webhook.verify(body, plain, json_parse=False)
            except _StdVerificationError as exc:
                last_reason = str(exc)
                if "timestamp" in last_reason.lower() or "missing" in last_reason.lower():
                    break  # the same for every secret
                continue
            except (ValueError, binascii.Error, UnicodeDecodeError):
                raise WebhookVerificationError("malformed webhook signature or body") from None
            return _parse(body, plain.get("webhook-id", ""))
        raise WebhookVerificationError(f"webhook rejected: {last_reason}")


def _parse(body: bytes, webhook_id: str) -> WebhookEnvelope:
    try:
        envelope = WebhookEnvelope.model_validate_json(body)
    except ValidationError:
        raise WebhookVerificationError("webhook body is not an event envelope") from None
    if envelope.id != webhook_id:
        raise WebhookVerificationError("envelope id differs from the Webhook-Id header")
    return envelope


def verify_webhook(
    body: bytes, headers: Mapping[str, str], secrets: str | bytes | Iterable[str | bytes]
) -> WebhookEnvelope:
    """One-shot ``WebhookVerifier(secrets).verify(body, headers)``."""
    return WebhookVerifier(secrets).verify(body, headers)


def sign_webhook(
    body: bytes, secret: str | bytes, *, msg_id: str, timestamp: datetime | None = None
) -> dict[str, str]:
    """The three delivery headers for ``body`` (as the service would send them; for tests and emulators)."""
    when = timestamp or datetime.now(UTC)
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    signature = Webhook(_key(secret)).sign(msg_id=msg_id, timestamp=when, data=body.decode("utf-8"))
    return {
        "Webhook-Id": msg_id,
        "Webhook-Timestamp": str(int(when.timestamp())),
        "Webhook-Signature": signature,
    }


class EventDeduplicator:
    """Remembers the last ``max_size`` event ids; ``seen(id)`` is True for a repeat (delivery is
    at-least-once and replays keep the event id)."""

    def __init__(self, max_size: int = 10_000) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self._max = max_size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def seen(self, event_id: str) -> bool:
        """True if ``event_id`` was seen before (then skip it); otherwise remember it and return False."""
        if event_id in self._ids:
            self._ids.move_to_end(event_id)
            return True
        self._ids[event_id] = None
        if len(self._ids) > self._max:
            self._ids.popitem(last=False)
        return False
