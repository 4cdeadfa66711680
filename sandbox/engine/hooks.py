"""The emulator's event hook (wired by ``create_app``): every recorded event fans out to webhook deliveries
and drives settlement claims."""

from __future__ import annotations

from ..records import Event
from ..state import EnvState
from .collections import on_settlement_event
from .webhooks import fan_out


def on_event(env: EnvState, event: Event) -> None:
    """Called by ``EnvState.record_event`` for every event of every environment."""
    if event.type == "settlement.status_changed":
        on_settlement_event(env, event.data)
    fan_out(env, event)
