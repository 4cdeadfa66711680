"""One router per resource; ``ROUTERS`` is what ``create_app`` mounts (part 2 appends its own)."""

from __future__ import annotations

from fastapi import APIRouter

from . import (
    admin,
    auth,
    batches,
    contract,
    fee_quotes,
    limits,
    payment_methods,
    payouts,
    settlements,
    transactions,
    wallet,
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
    contract.router,
]

__all__ = ["ROUTERS"]
