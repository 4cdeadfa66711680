"""An approver's decision on a paused payout run, shared by the console and ``payops approve``.

What the run waits for comes from the run itself: before pausing, the flow records its approval request in
the payops database (store/approval_requests.py: approvals needed, who may not approve, totals, rows,
findings, deadline). An approval is signed over what the approver was shown (the fingerprint of the stored
rows, recomputed here, the totals per currency and the row count) and stored; every finding must be
acknowledged first: the name check's, and rows another run paid recently (a second payment,
tasks/payouts/paid_before.py). Signing needs the approval key's private half
(tasks/approval/approval_keys.py), which only the payops server holds: this runs there. When enough distinct
approvers have signed, the run is resumed and the flow checks the signatures again. A rejection (with a
reason) resumes it at once as rejected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from uuid import UUID

from payops.store.approval_requests import ApprovalRequests, RequestView
from payops.store.approvals import Approvals, RunDecision
from payops.store.settings import PayopsSettings
from payops.store.users import UserError
from payops.tasks.approval.approval_gate import FINDING_TITLES
from payops.tasks.approval.approval_keys import load_signing_key
from payops.tasks.approval.approvals import (
    Subject,
    exclusion_reason,
    fingerprint,
    sign_approval,
    sign_rejection,
)
from payops.tasks.events.auditing import Auditor
from sqlalchemy import Engine


class DecisionError(Exception):
    """A decision that cannot be taken: ``status`` (HTTP-like) and a message for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Pending:
    """A paused run's approval request and the decisions taken so far."""

    request: RequestView
    decisions: list[RunDecision] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.request.flow_run_id

    @property
    def required(self) -> int:
        return self.request.required

    @property
    def excluded(self) -> tuple[str, ...]:
        return self.request.excluded

    @property
    def approvers(self) -> list[str]:
        return [d.user for d in self.decisions if d.decision == "approve"]

    @property
    def still_needed(self) -> int:
        return max(self.required - len(self.approvers), 0)

    def may_approve(self, name: str, role: str) -> bool:
        decided = {d.user for d in self.decisions}
        return role == "approver" and name not in self.excluded and name not in decided


def missing_acknowledgements(request: RequestView, acknowledged: Iterable[str]) -> list[str]:
    """The findings an approver has not acknowledged yet, as sentences (empty: may approve)."""
    given = set(acknowledged)
    out = []
    for kind, rows in request.findings.items():
        if kind not in given:
            where = f" (rows {', '.join(map(str, rows[:10]))}{'…' if len(rows) > 10 else ''})" if rows else ""
            out.append(f"{len(rows) or ''} {FINDING_TITLES[kind]}{where}".strip())
    return out


async def pending(engine: Engine, run_id: UUID) -> Pending | None:
    """The approval state of a paused payout run, or None when it is not waiting for approval."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    request = await asyncio.to_thread(ApprovalRequests(engine).get, str(run_id))
    if request is None or request.state != "waiting":
        return None
    async with get_client() as client:
        try:
            flow_run = await client.read_flow_run(run_id)
        except ObjectNotFound:
            return None
    if not (flow_run.state and flow_run.state.is_paused()):
        return None
    decisions = await asyncio.to_thread(Approvals(engine).decisions, str(run_id))
    return Pending(request, decisions)


def _shown_subject(engine: Engine, request: RequestView) -> Subject:
    """What the approver signs: recomputed from the rows the pages show, never taken on trust."""
    shown = fingerprint(ApprovalRequests(engine).row_tuples(request.flow_run_id))
    if shown != request.fingerprint:
        raise DecisionError(
            409, "The rows shown for this run changed after it asked for approval; nothing approved."
        )
    totals = {cur: Decimal(f["amount"]) for cur, f in request.totals.items()}
    return Subject.of(request.flow_run_id, shown, totals, request.rows)


async def decide(
    engine: Engine,
    auditor: Auditor,
    settings: PayopsSettings,
    *,
    run_id: UUID,
    user: str,
    role: str,
    approve: bool,
    reason: str,
    client: str,
    acknowledged: Iterable[str] = (),
) -> str:
    """Take one approver's decision; returns what happened, for the user. DecisionError when refused."""
    from prefect.flow_runs import resume_flow_run

    obj = f"run:{run_id}"
    if role != "approver":
        auditor.record(user, "approval.refused", obj, client, reason=f"role {role} cannot approve")
        raise DecisionError(403, "Only approvers can approve or reject payout runs.")
    key = await asyncio.to_thread(load_signing_key, settings)  # the server's private key; ApprovalKeyMissing
    state = await pending(engine, run_id)
    if state is None:
        raise DecisionError(409, "This run is not waiting for approval.")
    reason = reason.strip()[:500]
    store = Approvals(engine)
    if not approve:
        if not reason:
            raise DecisionError(400, "Give a reason for the rejection.")
        signed = sign_rejection(key, run_id=str(run_id), rejecter=user)
        await _store(store, str(run_id), user, "reject", reason, signed)
        auditor.record(user, "run.rejected", obj, client, reason=reason)
        await resume_flow_run(run_id, run_input={"reject": True, "comment": reason})
        return "Rejected: nothing will be sent."
    if user in state.excluded:
        auditor.record(
            user, "approval.refused", obj, client, reason=exclusion_reason(state.request.initiator)
        )
        you = (
            "You hold Prefect's login and could have started this run outside payops"
            if state.request.initiator is None
            else "You uploaded or started this run"
        )
        raise DecisionError(403, f"{you}; another approver must approve it.")
    missing = missing_acknowledgements(state.request, acknowledged)
    if missing:
        raise DecisionError(
            400, "Acknowledge what the checks found before approving: " + "; ".join(missing) + "."
        )
    subject = await asyncio.to_thread(_shown_subject, engine, state.request)
    token = sign_approval(key, subject, user)
    await _store(store, str(run_id), user, "approve", reason, token)
    auditor.record(
        user,
        "run.approved",
        obj,
        client,
        totals=dict(subject.totals),
        rows=subject.rows,
        comment=reason,
        acknowledged=sorted(state.request.findings),
    )
    decisions = await asyncio.to_thread(store.decisions, str(run_id))
    approvers = [d.user for d in decisions if d.decision == "approve"]
    if len(approvers) < state.required:
        left = state.required - len(approvers)
        return f"Approved. {left} more approval{'s' if left != 1 else ''} needed before anything is sent."
    await resume_flow_run(run_id, run_input={"reject": False, "comment": ""})
    auditor.record(user, "run.resumed", obj, client, approvers=", ".join(approvers))
    return "Approved: the run continues and sends the payouts."


async def _store(store: Approvals, run_id: str, user: str, decision: str, reason: str, token: str) -> None:
    try:
        await asyncio.to_thread(store.decide, run_id, user, decision, reason, token)
    except UserError as exc:
        raise DecisionError(409, f"{exc}.") from None
