"""The approval page (part of a run's page) and an approver's decision.

What a run waiting for approval shows is what the flow recorded (store/approval_requests.py): who started it,
the approvals needed, totals per currency with fees, balance before and after, limit headroom, the deadline
and its time left, every row (paged, with a "needs a look" filter), the runs that paid its rows before, and
each finding (the name check's; rows paid by another run), which the approver acknowledges before the
Approve button is enabled (here and on the server).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from payops.deployments.approving import missing_acknowledgements, pending
from payops.store.users import Account
from payops.tasks.approval.approval_gate import FINDING_TITLES
from payops.tasks.payouts.paid_before import earlier_runs
from starlette.datastructures import FormData

from ..deps import Approver, ConsoleDep, checked_form, parse_run_id
from ..run_review import page_number
from ..state import Console

log = logging.getLogger("payops.console")
router = APIRouter()
ROWS_PAGE = 50
DecisionForm = Annotated[FormData, Depends(checked_form(max_fields=12))]


async def approval_context(console: Console, run_id: UUID, account: Account, query: Any) -> dict[str, Any]:
    """The run page's approval block: the request (waiting or decided), its rows page and findings."""
    request = await asyncio.to_thread(console.requests.get, str(run_id))
    if request is None:
        return {"ask": None, "waiting": None, "may_approve": False}
    waiting = await pending(console.engine, run_id) if request.state == "waiting" else None
    look_only = query.get("rows") == "look"
    total = await asyncio.to_thread(console.requests.count_rows, str(run_id), look_only=look_only)
    pages = (total + ROWS_PAGE - 1) // ROWS_PAGE
    number = page_number(query.get("rpage"), pages)
    rows = await asyncio.to_thread(
        console.requests.rows,
        str(run_id),
        look_only=look_only,
        offset=(number - 1) * ROWS_PAGE,
        limit=ROWS_PAGE,
    )
    return {
        "ask": request,  # not "request": the templates' own name for the HTTP request
        "waiting": waiting,
        "may_approve": bool(waiting and waiting.may_approve(account.name, account.role)),
        "findings": [(kind, FINDING_TITLES[kind], found) for kind, found in request.findings.items()],
        "paid_before": [e.sentence(request.rows) for e in earlier_runs(request.paid_before)],
        "approval_rows": rows,
        "rows_filter": "look" if look_only else "all",
        "rows_total": total,
        "rows_page": number,
        "rows_pages": pages,
    }


@router.post("/runs/{run_id}/approval")
async def approval(
    request: Request, run_id: str, console: ConsoleDep, account: Approver, form: DecisionForm
) -> Response:
    flow_run_id = parse_run_id(run_id)
    approve = form.get("decision") == "approve"
    message = await console.decide(
        request,
        account,
        flow_run_id,
        approve=approve,
        reason=str(form.get("comment") or ""),
        acknowledged=[str(v) for v in form.getlist("acknowledge")],
    )
    log.info("run %s %s by %s: %s", run_id, "approved" if approve else "rejected", account.name, message)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


__all__ = ["approval_context", "missing_acknowledgements", "router"]
