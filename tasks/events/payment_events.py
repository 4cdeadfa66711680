"""Payments Service envelopes as Prefect events: one conversion for every path that relays them.

The webhook receiver (`deployments.console.webhooks`), the settlement relay (`tasks.settlements`) and the
events catch-up (`tasks.events.events_sync`) all turn an envelope ``{id, type, createdAt, data}`` into the
same Prefect event, so one deployment trigger serves them all and a duplicate is the same event:

* event ``payments.<type>`` (``payments.settlement.status_changed``, ``payments.payout.accepted``, ...);
* resource ``payments.<kind>.<reference>`` (kind = the type's first part; reference = ``data.reference``,
  else ``data.id``, else the event id) named ``<reference>``, with the labels ``payments.reference``,
  ``payments.webhook-id`` and, when the record carries them, ``payments.status`` / ``payments.outcome``
  (Prefect triggers match resource labels, not payloads);
* payload: the envelope's ``data`` (the record as it stood) plus ``eventId`` and ``eventType``;
* event id: uuid5 of the envelope id, so every delivery, replay or catch-up of one envelope is one event;
* occurred: the envelope's ``createdAt`` when present.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from payops.connectors.payments import WebhookEnvelope

__all__ = [
    "DEFAULT_FORWARD",
    "EVENT_NAMESPACE",
    "Emitter",
    "ForwardFilter",
    "as_envelope",
    "default_emitter",
    "emit",
    "envelope_to_event",
]

EVENT_NAMESPACE = uuid.UUID("5b0c7f64-52a4-4f0e-9a3c-7d1f3c1a2e90")
LABEL_FIELDS = ("status", "outcome")

Emitter = Callable[..., Any]
"""Called with the keyword arguments of `prefect.events.emit_event`."""


def default_emitter(**kwargs: Any) -> Any:
    """``prefect.events.emit_event``, looked up at call time (tests patch or inject their own)."""
    from prefect.events import emit_event

    return emit_event(**kwargs)


def as_envelope(envelope: WebhookEnvelope | Mapping[str, Any]) -> WebhookEnvelope:
    """A `WebhookEnvelope` from a model or its wire dict (``createdAt`` etc.)."""
    if isinstance(envelope, WebhookEnvelope):
        return envelope
    return WebhookEnvelope.model_validate(envelope)


def envelope_to_event(envelope: WebhookEnvelope | Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of `prefect.events.emit_event` for an envelope (see the module docstring)."""
    env = as_envelope(envelope)
    data = dict(env.data or {})
    kind = env.type.split(".", 1)[0]
    reference = str(data.get("reference") or data.get("id") or env.id)
    resource = {
        "prefect.resource.id": f"payments.{kind}.{reference}",
        "prefect.resource.name": reference,
        "payments.reference": reference,
        "payments.webhook-id": env.id,
    }
    for name in LABEL_FIELDS:
        if isinstance(data.get(name), str):
            resource[f"payments.{name}"] = data[name]
    event: dict[str, Any] = {
        "event": f"payments.{env.type}",
        "resource": resource,
        "payload": {**data, "eventId": env.id, "eventType": env.type},
        "id": uuid.uuid5(EVENT_NAMESPACE, env.id),
    }
    if env.created_at is not None:
        event["occurred"] = env.created_at
    return event


def emit(envelope: WebhookEnvelope | Mapping[str, Any], emitter: Emitter | None = None) -> Any:
    """Emit the Prefect event of `envelope` with `emitter` (default `prefect.events.emit_event`)."""
    return (emitter or default_emitter)(**envelope_to_event(envelope))


DEFAULT_FORWARD = "settlement.*,collection.*,utility_purchase.*,transfer.*,payout.*:failed|refunded|held"
"""Events that drive work: all settlement, collection, utility purchase and transfer events, and payout events
whose record ends ``failed``/``refunded``/``held`` (the payout flow polls every other payout status)."""


class ForwardFilter:
    """Which envelopes become Prefect events: comma-separated ``<type pattern>[:<status>|<status>...]`` rules.

    A type pattern is a shell glob (``payout.*``); with statuses, the record's ``data.status`` must be one of
    them. ``*`` forwards everything. Every accepted envelope stays in the inbox whatever the filter says.
    """

    def __init__(self, rules: str = DEFAULT_FORWARD) -> None:
        self.rules: list[tuple[str, frozenset[str] | None]] = []
        for raw in rules.split(","):
            rule = raw.strip()
            if not rule:
                continue
            pattern, colon, statuses = rule.partition(":")
            names = frozenset(s.strip() for s in statuses.split("|") if s.strip()) if colon else None
            if not pattern.strip() or (colon and not names):
                raise ValueError(f"forward rule {rule!r}: expected '<type pattern>[:<status>|<status>]'")
            self.rules.append((pattern.strip(), names))
        if not self.rules:
            raise ValueError("the forward filter needs at least one rule (use '*' to forward everything)")

    def event_types(self, known: Iterable[str]) -> list[str]:
        """The types of ``known`` some rule's pattern selects: what a webhook endpoint must subscribe to."""
        return sorted(t for t in set(known) if any(fnmatchcase(t, p) for p, _statuses in self.rules))

    def __call__(self, envelope: WebhookEnvelope | Mapping[str, Any]) -> bool:
        env = as_envelope(envelope)
        status = (env.data or {}).get("status")
        return any(
            fnmatchcase(env.type, pattern) and (statuses is None or status in statuses)
            for pattern, statuses in self.rules
        )
