"""The all-in-one's webhook wiring: register the console's receiver as a webhook endpoint of the emulator.

The emulator's admin API (``/_sandbox/businesses/{business}/{environment}/webhook-endpoints``, the
console equivalent of the spec's endpoint registration) gives the signing secret only when an endpoint is
created or its secret rotated. `ensure_endpoint` is restart-safe: an endpoint already registered for the
receiver's URL is reused (its types and switch updated, its secret rotated), never registered twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from payops.connectors.payments.models import EVENT_TYPES
from payops.tasks.events.payment_events import ForwardFilter

__all__ = ["RegisteredEndpoint", "ensure_endpoint", "subscribed_types"]

DESCRIPTION = "payops console (payops serve)"
SUBSCRIBABLE = EVENT_TYPES - {"webhook.test"}


@dataclass(frozen=True)
class RegisteredEndpoint:
    id: str
    url: str
    event_types: list[str]
    secret: str  # never logged or printed
    reused: bool

    def __repr__(self) -> str:  # the secret stays out of any log line that prints this object
        return f"RegisteredEndpoint(id={self.id!r}, url={self.url!r}, reused={self.reused})"


def subscribed_types(forward: str) -> list[str]:
    """The event types the console's forward filter (``PAYOPS_WEBHOOK_FORWARD``) can select."""
    return ForwardFilter(forward).event_types(SUBSCRIBABLE)


def ensure_endpoint(
    sandbox_url: str,
    receiver_url: str,
    event_types: list[str],
    *,
    business: str = "demo",
    environment: str = "test",
    timeout_s: float = 10.0,
) -> RegisteredEndpoint:
    """Register ``receiver_url`` for ``event_types`` (or reuse its endpoint) and return it with its secret."""
    base = f"{sandbox_url.rstrip('/')}/_sandbox/businesses/{business}/{environment}/webhook-endpoints"
    body = {"url": receiver_url, "eventTypes": event_types, "enabled": True, "description": DESCRIPTION}
    with httpx.Client(timeout=timeout_s) as client:
        listed = client.get(base)
        listed.raise_for_status()
        existing = next((e for e in listed.json()["items"] if e["url"] == receiver_url), None)
        if existing is None:
            created = client.post(base, json=body)
            created.raise_for_status()
            endpoint, reused = created.json(), False
        else:
            edit = {k: v for k, v in body.items() if k != "url"}
            client.patch(f"{base}/{existing['id']}", json=edit).raise_for_status()
            rotated = client.post(f"{base}/{existing['id']}/rotate-secret")
            rotated.raise_for_status()
            endpoint, reused = rotated.json(), True
    return RegisteredEndpoint(
        id=endpoint["id"],
        url=endpoint["url"],
        event_types=list(endpoint.get("eventTypes") or []),
        secret=endpoint["secret"],
        reused=reused,
    )
