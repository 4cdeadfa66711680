"""``GET /v1/events``: the catch-up feed, with the spec's visibility, existence, retention and lag rules."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..errors import invalid
from ..records import Event
from ..state import EnvState
from .webhooks import GATED_FAMILIES, family

RETENTION = timedelta(days=90)
#: Permission needed to see an event family in the feed.
FAMILY_PERMISSION = {
    "collection": "collections.read",
    "payout": "disbursements.read",
    "utility_purchase": "disbursements.read",
    "settlement": "settlements.read",
    "transfer": "wallettransfer.read",
}


def exists_for_feed(env: EnvState, event: Event) -> bool:
    """Events exist only once the business has an endpoint; gated families only after a (non-legacy)
    endpoint was created or edited (spec Versioning 5)."""
    ext = env.resources
    if ext.feed_from_seq is None or event.seq <= ext.feed_from_seq:
        return False
    if family(event.type) in GATED_FAMILIES:
        return ext.gated_from_seq is not None and event.seq > ext.gated_from_seq
    return True


def _seq_of(env: EnvState, event_id: str) -> int | None:
    index = env.resources.event_index
    if len(index) < len(env.events):
        for event in env.events[len(index) :]:
            index[event.id] = event.seq
    return index.get(event_id)


def feed_page(
    env: EnvState, permissions: frozenset[str], after: str | None, limit: int, now: datetime, lag_s: float
) -> dict[str, Any]:
    """One page: ``items`` (envelopes) and ``nextAfter`` while more visible events follow.

    Events become visible ``lag_s`` after they happened, in the order received; the visible part is always
    a prefix of that order, so a caller resuming from ``after`` never skips a late event.
    """
    oldest = now - RETENTION
    start = 0
    if after is not None:
        seq = _seq_of(env, after)
        if seq is None:
            raise invalid("after", "unknown event id")
        if env.events[seq - 1].created_at < oldest:
            raise invalid("after", "event is older than the 90-day retention; restart without after")
        start = seq
    cutoff = now - timedelta(seconds=lag_s)
    items: list[dict[str, Any]] = []
    more = False
    for event in env.events[start:]:
        if event.created_at > cutoff:
            break
        if event.created_at < oldest or not exists_for_feed(env, event):
            continue
        if FAMILY_PERMISSION.get(family(event.type)) not in permissions:
            continue
        if len(items) == limit:
            more = True
            break
        items.append(event.to_wire())
    page: dict[str, Any] = {"items": items}
    if more:
        page["nextAfter"] = items[-1]["id"]
    return page
