"""One router per resource; ``ROUTERS`` is what ``create_app`` mounts."""

from __future__ import annotations

from fastapi import APIRouter

from . import (
    admin,
    auth,
    batches,
    checkouts,
    collections,
    contract,
    events,
    fee_quotes,
    limits,
    party_lookups,
    payer_page,
    payment_methods,
    payouts,
    recipients,
    settlements,
    transactions,
    transfers,
    utility_purchases,
    wallet,
    webhook_admin,
)

ROUTERS: list[APIRouter] = [
    auth.router,
    payouts.router,
    batches.router,
    wallet.router,
    limits.router,
    fee_quotes.router,
    payment_methods.router,
    transactions.router,
    settlements.router,
    admin.router,
    collections.router,
    checkouts.router,
    payer_page.router,
    utility_purchases.router,
    transfers.router,
    recipients.router,
    party_lookups.router,
    events.router,
    webhook_admin.router,
    contract.router,
]

__all__ = ["ROUTERS"]
