"""Webhook verification with the secret exactly as issued, rotation, tolerance, envelope, dedupe."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
from payops.connectors.payments import (
    EventDeduplicator,
    Payout,
    WebhookVerificationError,
    WebhookVerifier,
    sign_webhook,
    verify_webhook,
)

from tests.connectors.payments_samples import EVENT

SECRET = "whsec_issued-secret-not-base64!"  # used exactly as issued, even with the whsec_ prefix
BODY = json.dumps(EVENT).encode()


def spec_signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The spec's scheme, computed independently of standardwebhooks."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers_for(secret: str, *, age_s: float = 0, msg_id: str = "ev-1", body: bytes = BODY) -> dict[str, str]:
    ts = int((datetime.now(UTC) - timedelta(seconds=age_s)).timestamp())
    return {
        "Webhook-Id": msg_id,
        "Webhook-Timestamp": str(ts),
        "Webhook-Signature": spec_signature(secret, msg_id, ts, body),
    }


def test_verifies_the_spec_signature_and_parses_the_envelope() -> None:
    envelope = verify_webhook(BODY, headers_for(SECRET), SECRET)
    assert envelope.id == "ev-1" and envelope.type == "payout.status_changed"
    record = envelope.record()
    assert isinstance(record, Payout) and record.reference == "po-1"


def test_sign_webhook_matches_the_spec_scheme() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    headers = sign_webhook(BODY, SECRET, msg_id="ev-1", timestamp=when)
    ts = int(when.timestamp())
    assert headers == {
        "Webhook-Id": "ev-1",
        "Webhook-Timestamp": str(ts),
        "Webhook-Signature": spec_signature(SECRET, "ev-1", ts, BODY),
    }


@pytest.mark.parametrize(
    "mutate",
    [
        lambda h, b: (h, b.replace(b"po-1", b"po-2")),  # body changed
        lambda h, b: (
            {
                **h,
                "Webhook-Signature": spec_signature("other-secret", "ev-1", int(h["Webhook-Timestamp"]), b),
            },
            b,
        ),
        lambda h, b: ({**h, "Webhook-Timestamp": str(int(h["Webhook-Timestamp"]) + 1)}, b),
        lambda h, b: ({k: v for k, v in h.items() if k != "Webhook-Signature"}, b),
        lambda h, b: ({**h, "Webhook-Signature": "v1,not base64!!"}, b),
        lambda h, b: ({**h, "Webhook-Signature": "garbage"}, b),
        lambda h, b: ({**h, "Webhook-Signature": "v2," + h["Webhook-Signature"][3:]}, b),
    ],
)
def test_rejects_tampered_or_malformed_deliveries(mutate) -> None:
    headers, body = mutate(headers_for(SECRET), BODY)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body, headers, SECRET)


@pytest.mark.parametrize("age_s,ok", [(0, True), (290, True), (-290, True), (310, False), (-310, False)])
def test_five_minute_tolerance(age_s: float, ok: bool) -> None:
    headers = headers_for(SECRET, age_s=age_s)
    if ok:
        assert verify_webhook(BODY, headers, SECRET).id == "ev-1"
    else:
        with pytest.raises(WebhookVerificationError, match="timestamp"):
            verify_webhook(BODY, headers, SECRET)


def test_rotation_accepts_old_and_new_secret() -> None:
    verifier = WebhookVerifier(["new-secret", SECRET])
    assert verifier.verify(BODY, headers_for(SECRET)).id == "ev-1"
    assert verifier.verify(BODY, headers_for("new-secret")).id == "ev-1"
    with pytest.raises(WebhookVerificationError):
        verifier.verify(BODY, headers_for("revoked-secret"))
    assert "secret" not in repr(verifier).replace("secrets=", "")


def test_envelope_id_must_match_header_and_body_must_be_an_envelope() -> None:
    with pytest.raises(WebhookVerificationError, match="Webhook-Id"):
        verify_webhook(BODY, headers_for(SECRET, msg_id="ev-other"), SECRET)
    not_envelope = b'{"hello": "world"}'
    with pytest.raises(WebhookVerificationError, match="envelope"):
        verify_webhook(not_envelope, headers_for(SECRET, body=not_envelope), SECRET)


def test_lowercase_headers_and_unknown_event_types() -> None:
    body = json.dumps(
        {**EVENT, "type": "payout.teleported", "data": {"reference": "x", "status": "beamed"}}
    ).encode()
    headers = {k.lower(): v for k, v in headers_for(SECRET, body=body).items()}
    envelope = verify_webhook(body, headers, SECRET)
    assert envelope.type == "payout.teleported"


def test_dedupe_skips_repeats_with_bounded_memory() -> None:
    dedupe = EventDeduplicator(max_size=3)
    assert [dedupe.seen(i) for i in ["a", "b", "a", "c", "d"]] == [False, False, True, False, False]
    assert len(dedupe) == 3 and "b" not in dedupe  # oldest forgotten
    assert dedupe.seen("a") is True
    with pytest.raises(ValueError):
        EventDeduplicator(max_size=0)
