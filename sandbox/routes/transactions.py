"""``GET /v1/transactions``: every movement, newest first, with the spec's filters and cursor pages."""

from __future__ import annotations

from bisect import bisect_left
from datetime import datetime
from operator import attrgetter
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from payops.connectors.payments.models import TransactionPage

from ..auth import AuthContext, require
from ..errors import invalid
from ..idempotency import json_response
from .common import aware, decode_cursor, encode_cursor, error_responses

router = APIRouter(tags=["account"])

Kind = Literal["collection", "payout", "settlement", "utility", "wallet_transfer"]
SettlementStatus = Literal["not_eligible", "eligible", "claimed", "settled"]
ReconciliationStatus = Literal["unchecked", "matched", "mismatched"]


@router.get(
    "/v1/transactions",
    response_model=TransactionPage,
    responses=error_responses(),
    summary="Unified transaction list",
    response_model_exclude_none=True,
)
async def list_transactions(
    ctx: Annotated[AuthContext, Depends(require("transactions.read"))],
    kind: Kind | None = None,
    status: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    channel: Literal["api"] | None = None,
    settlement_status: Annotated[SettlementStatus | None, Query(alias="settlementStatus")] = None,
    reconciliation_status: Annotated[ReconciliationStatus | None, Query(alias="reconciliationStatus")] = None,
    from_: Annotated[datetime | None, Query(alias="from", description="Created at or after")] = None,
    to: Annotated[datetime | None, Query(description="Created before")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> Response:
    """A page holds at most ``limit`` items; ``nextCursor`` is absent on the last page."""
    start, end = aware(from_), aware(to)
    if start is not None and end is not None and start > end:
        raise invalid("from", "must not be after to")
    records = ctx.env.transactions
    index = len(records) if cursor is None else min(decode_cursor(cursor) - 1, len(records))
    in_order = ctx.env.transactions_in_time_order
    if in_order and end is not None:  # skip the records created at or after `to` without reading them
        index = min(index, bisect_left(records, end, key=attrgetter("created_at")))
    items = []
    last_seq = 0
    while index > 0 and len(items) < limit:
        index -= 1
        r = records[index]
        if in_order and start is not None and r.created_at < start:
            index = 0  # every older record is before `from` too
            break
        if kind is not None and r.kind != kind:
            continue
        if status is not None and r.status != status:
            continue
        if channel is not None and r.channel != channel:
            continue
        if settlement_status is not None and getattr(r, "settlement_status", None) != settlement_status:
            continue
        if reconciliation_status is not None and r.reconciliation_status != reconciliation_status:
            continue
        if start is not None and r.created_at < start:
            continue
        if end is not None and r.created_at >= end:
            continue
        items.append(r.to_transaction())
        last_seq = r.seq
    page: dict[str, object] = {"items": items}
    if len(items) == limit and index > 0:
        page["nextCursor"] = encode_cursor(last_seq)
    return json_response(200, page)
