"""Routers of part 2 (collections, checkouts, utilities, transfers, reference data, events, webhook admin)."""

from __future__ import annotations

from fastapi import APIRouter

from . import (
    checkouts,
    collections,
    events,
    party_lookups,
    payer_page,
    recipients,
    transfers,
    utilities,
    webhook_admin,
)

PART2_ROUTERS: list[APIRouter] = [
    collections.router,
    checkouts.router,
    payer_page.router,
    utilities.router,
    transfers.router,
    recipients.router,
    party_lookups.router,
    events.router,
    webhook_admin.router,
]

__all__ = ["PART2_ROUTERS"]
