"""Webhook endpoints (console rules), fan-out of events to deliveries, signing, the retry schedule.

The HTTP side of delivery is in ``sandbox.delivery``; this module only decides *what* is due and records
*what happened*.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from payops.connectors.payments.models import EVENT_TYPES

from ..errors import ApiError, invalid, not_found
from ..records import Event, new_id
from ..resources import Delivery, DeliveryAttempt, WebhookEndpoint
from ..state import EnvState

MAX_ENDPOINTS = 10
#: Gap before each attempt (seconds after the previous one): 6 attempts over about a day (23 h 11 min).
ATTEMPT_GAPS_S = (0, 60, 600, 3600, 18000, 61200)
TIMEOUT_S = 10.0
OLD_SECRET_GRACE = timedelta(hours=24)
RESPONSE_START_CHARS = 200
#: Event families that start only after an endpoint is created or edited (spec Versioning 5).
GATED_FAMILIES = frozenset({"utility_purchase", "settlement", "transfer"})
SUBSCRIBABLE = frozenset(EVENT_TYPES - {"webhook.test"})
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def family(type_: str) -> str:
    """``"payout.accepted"`` → ``"payout"``."""
    return type_.split(".", 1)[0]


def new_secret() -> str:
    """A signing secret (``whsec_`` + base64); signatures use its UTF-8 bytes exactly as issued."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,`` + base64 HMAC-SHA256 of ``id.timestamp.body`` keyed by the secret's UTF-8 bytes."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def check_url(url: str, resolved: list[str], *, allow_local: bool) -> None:
    """400 unless ``url`` is public https (``resolved``: the addresses its host resolves to, if any).

    With ``allow_local`` an ``http``/``https`` URL on 127.0.0.1, ::1 or localhost is also accepted.
    """
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        _ = parts.port
    except ValueError:
        raise invalid("url", "not a URL") from None
    if not host or len(url) > 2048:
        raise invalid("url", "not an absolute URL")
    if allow_local and host in LOCAL_HOSTS and parts.scheme in {"http", "https"}:
        return
    if parts.scheme != "https":
        raise invalid("url", "webhook URLs must use https")
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        raise invalid("url", "webhook URLs must be public (private host)")
    for address in [host, *resolved]:
        try:
            ip = ipaddress.ip_address(address.strip("[]"))
        except ValueError:
            continue
        if not ip.is_global:
            raise invalid("url", f"webhook URLs must be public ({address} is a private address)")


def _business_endpoint_count(env: EnvState) -> int:
    return sum(len(e.resources.endpoints) for e in env.sandbox.envs_of(env.business.id))


def _check_types(types: list[str] | None) -> list[str] | None:
    if types is None:
        return None
    unknown = sorted(set(types) - SUBSCRIBABLE)
    if unknown:
        raise invalid("eventTypes", f"unknown event types {unknown}")
    return sorted(set(types))


def create_endpoint(
    env: EnvState,
    url: str,
    event_types: list[str] | None,
    enabled: bool,
    description: str | None,
    legacy: bool,
    now: datetime,
) -> WebhookEndpoint:
    """Register an endpoint (at most 10 per business, each URL once per environment)."""
    ext = env.resources
    if _business_endpoint_count(env) >= MAX_ENDPOINTS:
        raise ApiError(
            409, "endpoint_limit_reached", f"at most {MAX_ENDPOINTS} webhook endpoints per business"
        )
    if any(e.url == url for e in ext.endpoints.values()):
        raise ApiError(409, "endpoint_url_taken", "this URL is already registered")
    endpoint = WebhookEndpoint(
        id=new_id("we_"),
        url=url,
        secret=new_secret(),
        created_at=now,
        updated_at=now,
        event_types=_check_types(event_types),
        enabled=enabled,
        description=description,
        legacy=legacy,
    )
    ext.endpoints[endpoint.id] = endpoint
    if ext.feed_from_seq is None:
        ext.feed_from_seq = len(env.events)
    if not legacy and ext.gated_from_seq is None:
        ext.gated_from_seq = len(env.events)
    return endpoint


def get_endpoint(env: EnvState, endpoint_id: str) -> WebhookEndpoint:
    """The endpoint (404 otherwise)."""
    endpoint = env.resources.endpoints.get(endpoint_id)
    if endpoint is None:
        raise not_found("webhook endpoint")
    return endpoint


def edit_endpoint(env: EnvState, endpoint_id: str, changes: dict[str, Any], now: datetime) -> WebhookEndpoint:
    """Change URL, subscribed types or the enabled switch; the secret stays. An edit ends ``legacy``."""
    ext = env.resources
    endpoint = get_endpoint(env, endpoint_id)
    if "url" in changes and changes["url"] != endpoint.url:
        if any(e.url == changes["url"] for e in ext.endpoints.values()):
            raise ApiError(409, "endpoint_url_taken", "this URL is already registered")
        endpoint.url = changes["url"]
    if "eventTypes" in changes:
        endpoint.event_types = _check_types(changes["eventTypes"])
    if "description" in changes:
        endpoint.description = changes["description"]
    if "enabled" in changes:
        endpoint.enabled = bool(changes["enabled"])
        if not endpoint.enabled:
            cancel_pending(env, endpoint.id)
    endpoint.legacy = False
    endpoint.updated_at = now
    if ext.gated_from_seq is None:
        ext.gated_from_seq = len(env.events)
    return endpoint


def delete_endpoint(env: EnvState, endpoint_id: str) -> None:
    """Remove an endpoint; its pending deliveries are cancelled."""
    get_endpoint(env, endpoint_id)
    cancel_pending(env, endpoint_id)
    del env.resources.endpoints[endpoint_id]


def rotate_secret(env: EnvState, endpoint_id: str, now: datetime) -> WebhookEndpoint:
    """New secret signs everything from now on; the old one also signs for the next 24 h."""
    endpoint = get_endpoint(env, endpoint_id)
    endpoint.old_secret, endpoint.old_secret_expires_at = endpoint.secret, now + OLD_SECRET_GRACE
    endpoint.secret = new_secret()
    endpoint.updated_at = now
    return endpoint


def cancel_pending(env: EnvState, endpoint_id: str) -> None:
    """Pending deliveries of the endpoint become ``cancelled``."""
    for delivery in env.resources.deliveries.values():
        if delivery.endpoint_id == endpoint_id and delivery.status == "pending":
            delivery.status, delivery.next_attempt_at = "cancelled", None


def receives(env: EnvState, endpoint: WebhookEndpoint, event: Event) -> bool:
    """True when ``endpoint`` gets ``event``: enabled, subscribed, not a gated family on a legacy endpoint."""
    if not endpoint.enabled or not endpoint.subscribes(event.type):
        return False
    return not (family(event.type) in GATED_FAMILIES and endpoint.legacy)


def fan_out(env: EnvState, event: Event) -> list[Delivery]:
    """One pending delivery per endpoint that receives ``event`` (first attempt due at once)."""
    ext = env.resources
    out = []
    for endpoint in ext.endpoints.values():
        if receives(env, endpoint, event):
            out.append(_new_delivery(env, endpoint.id, event, event.created_at))
    return out


def _new_delivery(
    env: EnvState, endpoint_id: str, event: Event, at: datetime, replay_of: str | None = None
) -> Delivery:
    delivery = Delivery(
        id=new_id("wd_"),
        endpoint_id=endpoint_id,
        event=event,
        created_at=at,
        next_attempt_at=at,
        replay_of=replay_of,
    )
    env.resources.deliveries[delivery.id] = delivery
    return delivery


def send_test_event(env: EnvState, endpoint_id: str, now: datetime) -> Delivery:
    """A ``webhook.test`` event to one enabled endpoint (not in the feed)."""
    endpoint = get_endpoint(env, endpoint_id)
    if not endpoint.enabled:
        raise ApiError(409, "endpoint_disabled", "test events go to enabled endpoints only")
    event = Event(
        id=new_id("evt_"),
        seq=0,
        type="webhook.test",
        created_at=now,
        data={"endpointId": endpoint.id, "message": "test event from the sandbox console"},
        business_id=env.business.id,
        environment=env.environment,
    )
    return _new_delivery(env, endpoint.id, event, now)


def replay(env: EnvState, delivery_id: str, now: datetime) -> Delivery:
    """Replay a succeeded or failed delivery: a new delivery with the same event id."""
    delivery = env.resources.deliveries.get(delivery_id)
    if delivery is None:
        raise not_found("delivery")
    if delivery.status not in {"succeeded", "failed"}:
        raise ApiError(409, "delivery_not_replayable", "only succeeded or failed deliveries can be replayed")
    get_endpoint(env, delivery.endpoint_id)
    return _new_delivery(env, delivery.endpoint_id, delivery.event, now, replay_of=delivery.id)


def record_attempt(delivery: Delivery, attempt: DeliveryAttempt) -> None:
    """Append an attempt's result and decide: succeeded, next attempt, or failed after 6."""
    delivery.in_flight = False
    delivery.attempts.append(attempt)
    if delivery.status != "pending":
        return
    if attempt.error_class is None:
        delivery.status, delivery.next_attempt_at = "succeeded", None
    elif len(delivery.attempts) >= len(ATTEMPT_GAPS_S):
        delivery.status, delivery.next_attempt_at = "failed", None
    else:
        delivery.next_attempt_at = attempt.at + timedelta(seconds=ATTEMPT_GAPS_S[len(delivery.attempts)])


def error_class(status_code: int) -> str | None:
    """``None`` for 2xx, else redirect / http_4xx / http_5xx."""
    if 200 <= status_code < 300:
        return None
    if 300 <= status_code < 400:
        return "redirect"
    if 400 <= status_code < 500:
        return "http_4xx"
    return "http_5xx"
