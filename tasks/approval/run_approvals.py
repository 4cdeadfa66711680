"""What each approver of a payout run decided and wrote, for the run's summary and reports.

The console and ``payops approve`` keep every decision with its reason in the payops database
(`store.approvals.RunDecision`); the flow's resume answer carries one combined comment only. The summary's
``approval.decisions`` lists them one by one, so finance sees who approved and why.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC

from payops.store.database import RunDatabase
from payops.tasks.payouts.run_summary import ApprovalRecord, ApproverDecision
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)


def decisions_of(engine: Engine, flow_run_id: str) -> list[ApproverDecision]:
    """Each approver's decision on the run, oldest first."""
    from payops.store.approvals import Approvals

    return [
        ApproverDecision(
            by=d.user,
            decision="approved" if d.decision == "approve" else "rejected",
            comment=d.reason or "",
            at=d.at.replace(tzinfo=UTC).isoformat(),
        )
        for d in Approvals(engine).decisions(flow_run_id)
    ]


async def with_decisions(approval: ApprovalRecord, store: RunDatabase) -> ApprovalRecord:
    """The summary's ``approval`` with ``decisions``: `decisions_of` the current flow run in the run's payops
    database ``store``, when any was recorded. A database that cannot be read (or was not opened) leaves them
    out with a warning: they are a report detail, the payouts do not wait on them."""
    from prefect.runtime import flow_run

    if not isinstance(store, Engine):
        return approval
    try:
        decisions = await asyncio.to_thread(decisions_of, store, str(flow_run.id))
    except SQLAlchemyError as exc:
        log.warning("approvers' comments not read (%s): the summary keeps the combined comment", exc)
        return approval
    return approval.model_copy(update={"decisions": decisions}) if decisions else approval
