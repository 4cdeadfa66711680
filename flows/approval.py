"""The payout run's pause for approval: the Resume dialog's form and description, and reading the answer.

The dialog (Prefect UI, "Resume") shows a markdown description: the run's rows, totals, fees, name checks and
a link to the pre-flight artifact; the form asks for an explicit ``decision`` (``approve`` or ``reject``, no
default) and an optional ``comment``.

**Approvals are always signed** (tasks/approvals.py, issue 17's rule): ``approve`` counts only with enough
valid approvals signed with the approval key (``PAYOPS_APPROVAL_KEY`` or its Secret block; ``payops serve``
always makes one), given in the console or with ``payops approve``. The description says so, and an
``approve`` from the dialog without them ends the run "Not approved", nothing sent. A run that needs approval
while no key is configured is not paused at all: it ends "Not approved" saying which key is missing (the
payout flow checks that first). A ``reject`` is accepted from anywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

import anyio
from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.runtime import flow_run as flow_run_runtime
from prefect.states import Running
from pydantic import Field

from flows.summaries import Decision
from tasks.approvals import (
    ApprovalRefused,
    Requirement,
    approval_labels,
    check_approvals,
    read_rejecter,
)
from tasks.artifacts import artifact_key, markdown_table
from tasks.intake import PayoutRow
from tasks.money import money
from tasks.preflight import Preflight

CONSOLE_URL_ENV, UI_URL_ENVS = "PAYOPS_CONSOLE_URL", ("PAYOPS_PREFECT_UI_URL", "PREFECT_UI_URL")
PAUSE_GRACE_S = 60


class Approval(RunInput):
    """What an approver answers when a run pauses (the Resume dialog's form)."""

    decision: Literal["approve", "reject"] = Field(
        title="Decision", description="approve: send the payouts now; reject: send nothing and end the run"
    )
    comment: str = Field("", max_length=500, title="Comment", description="Why; kept in the run's summary")
    approvals: list[str] = Field(
        default_factory=list,
        max_length=10,
        title="Signed approvals",
        description="Filled in by the console or `payops approve`; leave empty here",
    )


@dataclass(frozen=True)
class Answer:
    """The decision on a paused run: approved (with the approvers) or the Decision saying why not."""

    approved: bool
    comment: str
    approvers: list[str] = field(default_factory=list)
    refusal: Decision | None = None


def prefect_ui_url() -> str | None:
    """The Prefect UI's address for links (PAYOPS_PREFECT_UI_URL, PREFECT_UI_URL), when one is set."""
    for name in UI_URL_ENVS:
        if os.environ.get(name):
            return os.environ[name].rstrip("/")
    from prefect.settings import PREFECT_UI_URL

    value = PREFECT_UI_URL.value()
    return str(value).rstrip("/") if value else None


def artifacts_link(run_id: str) -> str | None:
    """The Prefect UI page of a flow run's artifacts (None without a UI address)."""
    ui = prefect_ui_url()
    return f"{ui}/runs/flow-run/{run_id}?tab=Artifacts" if ui else None


def resume_description(
    label: str, pf: Preflight, rows: list[PayoutRow], rows_invalid: int, need: Requirement
) -> str:
    """The Resume dialog's markdown: what approving sends, and where to approve."""
    run_id = str(flow_run_runtime.id or "")
    total, fees = pf.amount_total, pf.fee_total
    lines = [
        f"### Approve payout run `{label}`?",
        "",
        f"**{len(rows)} payouts**, total **{money(total)}**, fees **{money(fees)}**, "
        f"total with fees **{money(total + fees)}**"
        + (f"; {rows_invalid} invalid row(s) skipped" if rows_invalid else ""),
        "",
        markdown_table(
            ["currency", "payouts", "amount", "fees", "total with fees"],
            [
                [c.currency, c.count, money(c.amount), money(c.fees), money(c.amount + c.fees)]
                for c in pf.currencies.values()
            ],
        ),
    ]
    verdicts = {v: sum(1 for n in pf.names if n.verdict == v) for v in ("mismatch", "partial", "unverified")}
    if pf.names:
        lines += [
            "",
            f"Payee names: {verdicts['mismatch']} mismatch(es), {verdicts['partial']} partial match(es), "
            f"{verdicts['unverified']} unverified, of {len(pf.names)} checked.",
        ]
    for problem in pf.problems:
        lines.append(f"- pre-flight problem: {problem}")
    link = artifacts_link(run_id)
    lines += [
        "",
        f"Pre-flight: [artifacts of this run]({link})" if link else "Pre-flight: this run's artifacts",
    ]
    console = os.environ.get(CONSOLE_URL_ENV, "").rstrip("/")
    where = f"the console ({console}/runs/{run_id})" if console else "the console"
    lines += [
        "",
        f"**Approvals are signed**: this run needs {max(need.required, 1)} approval(s) given in {where} "
        f"or with `payops approve {run_id} --user NAME`. Choosing *approve* here without them sends "
        "nothing and ends the run *Not approved*; *reject* here ends it *Rejected*.",
    ]
    return "\n".join(lines)


async def ask_approval(
    label: str, timeout_s: int, key: bytes, need: Requirement, total: Decimal, description: str
) -> Answer:
    """Pause for the decision; ``approve`` counts only with enough approvals signed with ``key``."""
    logger = get_run_logger()
    async with get_client() as client:
        await client.update_flow_run_labels(flow_run_runtime.id, approval_labels(total, need))
    logger.info(
        "approval requested: %s needs %d approval(s)%s; waiting up to %ss",
        label,
        max(need.required, 1),
        " (signed: console or `payops approve`)",
        timeout_s,
    )
    try:
        # The server keeps the pause open PAUSE_GRACE_S longer than the flow waits: a pause that expires on
        # the server forces the run to Failed ("paused and never resumed"), and this run is to end Cancelled
        # "Not approved". So the flow stops waiting first and takes its run out of the pause itself.
        with anyio.fail_after(timeout_s):
            answer = await pause_flow_run(
                wait_for_input=Approval.with_initial_data(description=description),
                timeout=timeout_s + PAUSE_GRACE_S,
                poll_interval=2,
                key=artifact_key(label, "approval"),
            )
    except (TimeoutError, FlowPauseTimeout):
        async with get_client() as client:
            await client.set_flow_run_state(flow_run_runtime.id, Running(message="approval timed out"))
        reason = f"no approval within {timeout_s}s"
        logger.warning("approval decided: %s; nothing sent", reason)
        return Answer(False, reason, refusal=Decision(kind="not_approved", reason=reason))
    if answer.decision == "reject":
        rejecter = read_rejecter(key, answer.approvals, str(flow_run_runtime.id))
        who = rejecter or "an unnamed user (Prefect UI or API)"
        logger.warning(
            "approval decided: rejected by %s: %s; nothing sent", who, answer.comment or "(no comment)"
        )
        decision = Decision(kind="rejected", by=rejecter, reason=answer.comment)
        return Answer(False, answer.comment, refusal=decision)
    try:
        approvers = check_approvals(
            key, answer.approvals, run_id=str(flow_run_runtime.id), total=total, need=need
        )
    except ApprovalRefused as exc:
        reason = f"approval refused: {exc}" + (
            "" if answer.approvals else "; approve in the console or with `payops approve`"
        )
        logger.error("approval decided: %s; nothing sent", reason)
        return Answer(False, f"approval refused: {exc}", refusal=Decision(kind="not_approved", reason=reason))
    logger.info(
        "approval decided: approved by %s%s",
        ", ".join(approvers) or "(no signed approval needed)",
        f": {answer.comment}" if answer.comment else "",
    )
    return Answer(True, answer.comment, approvers)
