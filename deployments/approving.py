"""An approver's decision on a paused payout run, shared by the console and ``payops approve``.

What the run waits for comes from the run itself: before pausing, the flow labels its run with the total,
the number of approvals needed and who may not approve (``payops.approval.*``). Each approval is signed
(tasks/approvals.py) and stored (store/approvals.py); when enough distinct approvers have signed, the run is
resumed with every signature, and the flow checks them again. A rejection (with a reason) resumes it at once
with ``approve: false``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from uuid import UUID

from sqlalchemy import Engine

from deployments.auditing import Auditor
from store.approvals import Approvals, RunDecision
from store.users import UserError
from tasks.approvals import LABEL, load_approval_key, sign_approval, sign_rejection


class DecisionError(Exception):
    """A decision that cannot be taken: ``status`` (HTTP-like) and a message for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Pending:
    """A paused run's approval state."""

    run_id: str
    total: Decimal
    required: int
    excluded: tuple[str, ...]
    decisions: list[RunDecision] = field(default_factory=list)

    @property
    def approvers(self) -> list[str]:
        return [d.user for d in self.decisions if d.decision == "approve"]

    @property
    def still_needed(self) -> int:
        return max(self.required - len(self.approvers), 0)

    def may_approve(self, name: str, role: str) -> bool:
        decided = {d.user for d in self.decisions}
        return role == "approver" and name not in self.excluded and name not in decided


async def pending(engine: Engine, run_id: UUID) -> Pending | None:
    """The approval state of a paused payout run, or None when it is not waiting for signed approvals."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            flow_run = await client.read_flow_run(run_id)
        except ObjectNotFound:
            return None
    labels = flow_run.labels or {}
    if not (flow_run.state and flow_run.state.is_paused()) or f"{LABEL}.total" not in labels:
        return None
    try:
        total = Decimal(str(labels[f"{LABEL}.total"]))
        required = int(str(labels[f"{LABEL}.required"]))
    except (InvalidOperation, ValueError, KeyError):
        return None
    excluded = tuple(x for x in str(labels.get(f"{LABEL}.excluded", "")).split(",") if x)
    decisions = await asyncio.to_thread(Approvals(engine).decisions, str(run_id))
    return Pending(str(run_id), total, required, excluded, decisions)


async def decide(
    engine: Engine,
    auditor: Auditor,
    *,
    run_id: UUID,
    user: str,
    role: str,
    approve: bool,
    reason: str,
    client: str,
) -> str:
    """Take one approver's decision; returns what happened, for the user. DecisionError when refused."""
    from prefect.flow_runs import resume_flow_run

    obj = f"run:{run_id}"
    if role != "approver":
        auditor.record(user, "approval.refused", obj, client, reason=f"role {role} cannot approve")
        raise DecisionError(403, "Only approvers can approve or reject payout runs.")
    state = await pending(engine, run_id)
    if state is None:
        raise DecisionError(409, "This run is not waiting for approval.")
    reason = reason.strip()[:500]
    store = Approvals(engine)
    if not approve:
        if not reason:
            raise DecisionError(400, "Give a reason for the rejection.")
        await _store(store, str(run_id), user, "reject", reason, "")
        auditor.record(user, "run.rejected", obj, client, reason=reason)
        signed = sign_rejection(await load_approval_key(), run_id=str(run_id), rejecter=user)
        answer = {"decision": "reject", "comment": reason, "approvals": [signed]}
        await resume_flow_run(run_id, run_input=answer)
        return "Rejected: nothing will be sent."
    if user in state.excluded:
        auditor.record(user, "approval.refused", obj, client, reason="uploaded or started the run")
        raise DecisionError(403, "You uploaded or started this run; another approver must approve it.")
    token = sign_approval(await load_approval_key(), run_id=str(run_id), total=state.total, approver=user)
    await _store(store, str(run_id), user, "approve", reason, token)
    auditor.record(user, "run.approved", obj, client, total=str(state.total), comment=reason)
    decisions = await asyncio.to_thread(store.decisions, str(run_id))
    tokens = [d.token for d in decisions if d.decision == "approve"]
    if len(tokens) < state.required:
        left = state.required - len(tokens)
        return f"Approved. {left} more approval{'s' if left != 1 else ''} needed before anything is sent."
    names = ", ".join(d.user for d in decisions if d.decision == "approve")
    comment = f"approved by {names}" + (f": {reason}" if reason else "")
    answer = {"decision": "approve", "comment": comment, "approvals": tokens}
    await resume_flow_run(run_id, run_input=answer)
    auditor.record(user, "run.resumed", obj, client, approvers=names)
    return "Approved: the run continues and sends the payouts."


async def _store(store: Approvals, run_id: str, user: str, decision: str, reason: str, token: str) -> None:
    try:
        await asyncio.to_thread(store.decide, run_id, user, decision, reason, token)
    except UserError as exc:
        raise DecisionError(409, f"{exc}.") from None
