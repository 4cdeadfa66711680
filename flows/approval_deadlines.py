"""The approval-deadlines sweep: suspended payout runs are resumed when their reminder or deadline is due.

A payout run on a worker waits for approval suspended (`flows.approval.wait_suspended`, ``approval_wait:
suspend``): no process of its own is left to send the reminder or end the run "Not approved" at the deadline.
Each suspension's pause ends `SWEEP_GRACE_S` after the run's next due time; this flow (the approval-deadlines
deployment, every minute) resumes each suspended payout run whose due time has come, and the run, started
again on a worker, reminds its approvers or ends "Not approved" itself (its rules stay in one place). It reads
Prefect's API only: no payops database, no key, no credential.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from payops.flows.flow_decorator import flow
from prefect import get_run_logger
from prefect.client.orchestration import PrefectClient, get_client
from prefect.client.schemas.filters import (
    FlowFilter,
    FlowFilterName,
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateName,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import FlowRun, StateType
from pydantic import BaseModel

SWEEP_GRACE_S = 300  # here, not in flows.approval: the sweep imports none of a payout run's modules
"""A suspended run's pause outlives its next due time (the reminder, else the deadline) by this long. This
sweep resumes the run at the due time, so that the run itself reminds its approvers or ends "Not approved";
where the approval-deadlines deployment is not running, Prefect fails the run once the pause ends ("paused
and never resumed")."""

PAYOUT_FLOW = "payout-spreadsheet"
PAGE = 200
NOT_A_DECISION = {"reject": False, "comment": ""}
"""The Resume form the sweep sends: it rejects nothing; the run reads the signed decisions itself."""


class DeadlinesSummary(BaseModel):
    """What one sweep found: the suspended payout runs, and those it resumed (their reminder or deadline was
    due)."""

    suspended: int
    resumed: list[str]


def is_due(run: FlowRun, now: datetime) -> bool:
    """A suspended run whose next due time (its pause's end less the grace) has come."""
    ends = run.state.state_details.pause_timeout if run.state else None
    return ends is not None and ends - timedelta(seconds=SWEEP_GRACE_S) <= now


async def suspended_payout_runs(client: PrefectClient) -> list[FlowRun]:
    """Every payout run suspended now (Prefect's Paused type, named Suspended), page by page."""
    state = FlowRunFilterState(
        type=FlowRunFilterStateType(any_=[StateType.PAUSED]), name=FlowRunFilterStateName(any_=["Suspended"])
    )
    flows = FlowFilter(name=FlowFilterName(any_=[PAYOUT_FLOW]))
    out: list[FlowRun] = []
    while True:
        page = await client.read_flow_runs(
            flow_filter=flows, flow_run_filter=FlowRunFilter(state=state), limit=PAGE, offset=len(out)
        )
        out += page
        if len(page) < PAGE:
            return out


async def resume_due(now: datetime | None = None) -> DeadlinesSummary:
    """Resume the suspended payout runs whose reminder or deadline is due (the flow's work)."""
    from prefect.flow_runs import resume_flow_run

    now = now or datetime.now(UTC)
    async with get_client() as client:
        runs = await suspended_payout_runs(client)
    resumed: list[str] = []
    for run in runs:
        if is_due(run, now):
            await resume_flow_run(UUID(str(run.id)), run_input=dict(NOT_A_DECISION))
            resumed.append(str(run.id))
    return DeadlinesSummary(suspended=len(runs), resumed=resumed)


@flow(name="approval-deadlines", log_prints=False)
async def approval_deadlines() -> DeadlinesSummary:
    """Resume the suspended payout runs whose approval reminder or deadline is due."""
    summary = await resume_due()
    get_run_logger().info(
        "%d payout run(s) suspended for approval; resumed %d (reminder or deadline due): %s",
        summary.suspended,
        len(summary.resumed),
        ", ".join(summary.resumed) or "none",
    )
    return summary
