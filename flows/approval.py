"""The payout run's approval phase: record what approvers see, tell them, pause, and read the decision.

Before pausing, the flow writes its approval request to the payops database (store/approval_requests.py:
totals per currency with fees, balance and limit headroom, every row with its name-check verdict, the
deadline), posts a notice to the approvers who may act on it, audits the request and emits
``payops.payout-run.needs-approval`` (an alert through the automations when configured). A reminder goes out
``approval_reminder_s`` before the deadline; at the deadline the run ends "Not approved", which is an event,
an alert and an audit entry.

**Approvals are signed** (tasks/approval/approvals.py) and kept in the database: the payops server (the
console, ``payops approve`` on its host) stores each approver's approval, signed with its private key over
what the page showed (fingerprint of the rows, totals per currency, row count), and resumes the run once
enough are in. The flow then reads and checks them itself with the public key only.
Prefect's Resume dialog shows the same context and offers only **reject**: unticking it makes the run look for
the approvals given in the console, and go on waiting when there are not enough.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from payops.flows.approval_deadlines import SWEEP_GRACE_S
from payops.store.settings import PayopsSettings
from payops.tasks.approval.approval_gate import FINDING_TITLES, ApprovalDesk
from payops.tasks.approval.approvals import (
    ApprovalRefused,
    Requirement,
    Start,
    Subject,
    check_approvals,
    read_rejecter,
)
from payops.tasks.approval.outcome_notices import approved_text, people, tell
from payops.tasks.events.alerts import emit_approval_reminder, emit_approved
from payops.tasks.payouts.run_summary import Decision
from payops.tasks.reports.artifacts import artifact_key, markdown_table
from payops.tasks.runtime.plurals import counted
from payops.tasks.wire.money import money_text
from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.states import Running
from pydantic import Field

PAUSE_GRACE_S = 60


class Approval(RunInput):
    """The Resume dialog's form: it can only reject; approvals are signed in the console."""

    reject: bool = Field(
        True,
        title="Reject this run",
        description="Ticked: send nothing and end the run. Approving needs signed approvals given in the "
        "payops console or with `payops approve` (see above); unticked, the run only checks for those and "
        "keeps waiting when there are not enough.",
    )
    comment: str = Field("", max_length=500, title="Reason", description="Why; kept in the run's summary")


@dataclass(frozen=True)
class Answer:
    """The decision on a paused run: approved (with the approvers) or the Decision saying why not."""

    approved: bool
    comment: str
    approvers: list[str] = field(default_factory=list)
    refusal: Decision | None = None


@dataclass(frozen=True)
class Ask:
    """What the flow asks approval for."""

    label: str
    subject: Subject
    need: Requirement
    start: Start
    timeout_s: int
    reminder_s: int


def prefect_ui_url(settings: PayopsSettings) -> str | None:
    """The Prefect UI's address for links (PAYOPS_PREFECT_UI_URL, else Prefect's PREFECT_UI_URL setting)."""
    if settings.prefect_ui_url:
        return settings.prefect_ui_url.rstrip("/")
    from prefect.settings import PREFECT_UI_URL

    value = PREFECT_UI_URL.value()
    return str(value).rstrip("/") if value else None


def artifacts_link(run_id: str, settings: PayopsSettings) -> str | None:
    """The Prefect UI page of a flow run's artifacts (None without a UI address)."""
    ui = prefect_ui_url(settings)
    return f"{ui}/runs/flow-run/{run_id}?tab=Artifacts" if ui else None


def console_run_url(run_id: str, settings: PayopsSettings) -> str | None:
    console = settings.console
    return f"{console}/runs/{run_id}" if console else None


def resume_description(
    ask: Ask, figures: dict[str, dict[str, Any]], findings: dict[str, list[int]], settings: PayopsSettings
) -> str:
    """The Resume dialog's markdown: the same context as the console's approval page, and where to approve."""
    run_id = ask.subject.run_id
    rows = ask.subject.rows
    lines = [
        f"### Approve payout run `{ask.label}`?",
        "",
        f"**{rows} payouts**; {ask.start.describe()}. "
        f"Needs **{ask.need.required} approval{'s' if ask.need.required != 1 else ''}**"
        + (f" from approvers other than {', '.join(ask.need.excluded)}" if ask.need.excluded else "")
        + f"; the run ends *Not approved* without them after {ask.timeout_s // 60} min.",
        "",
        markdown_table(
            [
                "currency",
                "payouts",
                "amount",
                "fees",
                "total with fees",
                "balance",
                "balance after",
                "daily left",
            ],
            [
                [
                    cur,
                    f["payouts"],
                    money_text(f["amount"], cur),
                    money_text(f["fees"], cur),
                    money_text(f["with_fees"], cur),
                    money_text(f["available"], cur) if f["available"] is not None else "unknown",
                    money_text(f["after"], cur) if f["after"] is not None else "unknown",
                    money_text(f["daily_remaining"], cur) if f["daily_remaining"] is not None else "unknown",
                ]
                for cur, f in figures.items()
            ],
        ),
        "",
    ]
    mismatches = len(findings.get("mismatch", []))
    lines.append(f"Payee names: {counted(mismatches, 'mismatch', 'mismatches')}.")
    for kind, found in findings.items():
        where = f" (rows {', '.join(map(str, found[:20]))}{'…' if len(found) > 20 else ''})" if found else ""
        lines.append(f"- **{len(found) or ''} {FINDING_TITLES[kind]}**{where}".replace("** ", "**", 1))
    link = artifacts_link(run_id, settings)
    lines += [
        "",
        f"Pre-flight: [artifacts of this run]({link})" if link else "Pre-flight: this run's artifacts",
    ]
    page = console_run_url(run_id, settings)
    where = f"the console, {page}," if page else "the console"
    lines += [
        "",
        f"**Approve in {where}** or with `payops approve {run_id} --user NAME`: approvals are signed over "
        "these rows and totals. This dialog can only **reject** (with a reason).",
    ]
    return "\n".join(lines)


async def _back_to_running(message: str) -> None:
    from prefect.runtime import flow_run as flow_run_runtime

    async with get_client() as client:
        await client.set_flow_run_state(flow_run_runtime.id, Running(message=message))


async def ask_approval(ask: Ask, key: Ed25519PublicKey, desk: ApprovalDesk, description: str) -> Answer:
    """Pause until enough valid signed approvals are in, a rejection, or the deadline. ``key`` is the
    approval key's public half (approval_keys.load_verify_key): the flow verifies, never signs."""
    logger = get_run_logger()
    run_id = ask.subject.run_id
    logger.info(
        "approval requested: %s needs %d approval(s) (%s); waiting up to %ss",
        ask.label,
        ask.need.required,
        ask.start.describe(),
        ask.timeout_s,
    )
    request = await asyncio.to_thread(desk.requests.get, run_id)
    left = request.seconds_left if request is not None else ask.timeout_s  # a run started again waits on
    deadline = time.monotonic() + left
    reminded = request is not None and request.reminded_at is not None
    due = 0 < ask.reminder_s < ask.timeout_s and not reminded
    remind_at = deadline - ask.reminder_s if due else None
    attempt = 0
    # Prefect refuses a pause key the flow run has used (pause_flow_run then returns None): a run Prefect
    # retries (`prefect flow-run retry`, the UI's Retry) pauses again under keys of its own attempt.
    from prefect.runtime import flow_run

    run_count = flow_run.run_count or 1
    while True:
        now = time.monotonic()
        if now >= deadline:
            return await _expired(ask, desk)
        until = remind_at if remind_at is not None and now < remind_at else deadline
        wait = until - now
        try:
            # The server keeps the pause open PAUSE_GRACE_S longer than the flow waits: a pause that expires
            # on the server forces the run to Failed ("paused and never resumed"), and this run is to end
            # "Not approved". So the flow stops waiting first and takes its run out of the pause itself. Each
            # pause has its own key (above).
            with anyio.fail_after(wait):
                answer = await pause_flow_run(
                    wait_for_input=Approval.with_initial_data(description=description),
                    timeout=math.ceil(wait) + PAUSE_GRACE_S,
                    poll_interval=2,
                    key=f"{artifact_key(ask.label, 'approval')}-{run_count}-{attempt}",
                )
        except (TimeoutError, FlowPauseTimeout):
            attempt += 1
            await _back_to_running("approval still pending")
            if remind_at is not None and until == remind_at:
                remind_at = None
                left = max(int(deadline - time.monotonic()), 0)
                await asyncio.to_thread(desk.remind, run_id, ask.label, ask.need, left)
                emit_approval_reminder(ask.label, left)
                logger.info("approval reminder sent: %ss left", left)
            continue
        attempt += 1
        if (decided := await _decided(ask, key, desk, answer.reject, answer.comment)) is not None:
            return decided
        logger.info("resumed without enough signed approvals: still waiting for approval")


async def _decided(
    ask: Ask, key: Ed25519PublicKey, desk: ApprovalDesk, reject: bool, comment: str
) -> Answer | None:
    """The decision once the run is resumed (the Resume form's ``reject`` and ``comment``, else the signed
    decisions in the database), or None while there are not enough approvals: wait on."""
    if reject:
        return await _rejected(ask, key, desk, comment)
    logger = get_run_logger()
    run_id = ask.subject.run_id
    decisions = await asyncio.to_thread(desk.approvals.decisions, run_id)
    if any(d.decision == "reject" for d in decisions):  # signed in the console; the resume carried no form
        return await _rejected(ask, key, desk, "")
    tokens = [d.token for d in decisions if d.decision == "approve"]
    if len(tokens) < ask.need.required:
        return None
    try:
        approvers = check_approvals(key, tokens, ask.subject, ask.need)
    except ApprovalRefused as exc:
        reason = f"approval refused: {exc}"
        logger.error("approval decided: %s; nothing sent", reason)
        await asyncio.to_thread(desk.close, run_id, "not_approved", "payops", reason=reason)
        return Answer(False, reason, refusal=Decision(kind="not_approved", reason=reason))
    comment = approvers_comments(decisions)
    await asyncio.to_thread(desk.close, run_id, "approved", "payops", approvers=", ".join(approvers))
    logger.info(
        "approval decided: approved by %s%s", ", ".join(approvers), f" ({comment})" if comment else ""
    )
    await _tell_approved(ask, desk, approvers, comment)
    return Answer(True, comment, approvers)


async def wait_suspended(ask: Ask, key: Ed25519PublicKey, desk: ApprovalDesk, description: str) -> Answer:
    """Wait for the decision with no process waiting (a deployment's run on a worker): the run is
    suspended (Prefect's `suspend_flow_run`: its process ends, a worker slot is free) and started again from
    the top on any worker when resumed: by the payops server once enough approvals or a rejection are in, by
    Prefect's Resume dialog, or by the approval-deadlines sweep at the reminder and at the deadline. Each
    start replays what came before (same label) and reads the decision here; each suspension has a key of
    its own. Returns the decision; returns only when decided."""
    from prefect.flow_runs import suspend_flow_run
    from prefect.runtime import flow_run

    run_id = ask.subject.run_id
    prefix = f"{artifact_key(ask.label, 'approval')}-{flow_run.run_count or 1}-s"
    seen = await _suspensions(run_id, prefix)
    # What was decided meanwhile (also on a start after a crash: approvals given before it count)
    reject, comment = await _resume_form(run_id, f"{prefix}{seen - 1}") if seen else (False, "")
    if (decided := await _decided(ask, key, desk, reject, comment)) is not None:
        return decided
    request = await asyncio.to_thread(desk.requests.get, run_id)
    left = request.seconds_left if request is not None else 0
    if left <= 0:
        return await _expired(ask, desk)
    due = left
    if 0 < ask.reminder_s < ask.timeout_s and request is not None and request.reminded_at is None:
        if left <= ask.reminder_s:
            await asyncio.to_thread(desk.remind, run_id, ask.label, ask.need, left)
            emit_approval_reminder(ask.label, left)
            get_run_logger().info("approval reminder sent: %ss left", left)
        else:
            due = left - ask.reminder_s
    get_run_logger().info("suspended until decided (%ss left); no process waits", left)
    await suspend_flow_run(
        wait_for_input=Approval.with_initial_data(description=description),
        timeout=due + SWEEP_GRACE_S,
        key=f"{prefix}{seen}",
    )
    raise AssertionError("suspend_flow_run returned: the run was not suspended")  # it raises Pause


async def _suspensions(run_id: str, prefix: str) -> int:
    """How many times this attempt of the run suspended for approval (its pause keys with ``prefix``)."""
    async with get_client() as client:
        run = await client.read_flow_run(run_id)
    return sum(1 for k in run.empirical_policy.pause_keys or () if str(k).startswith(prefix))


async def _resume_form(run_id: str, pause_key: str) -> tuple[bool, str]:
    """(reject, comment) as the suspension ``pause_key`` was resumed with; no form (a resume without
    input) rejects nothing. Read raw: `RunInput.load` turns a missing form into the form's defaults."""
    from uuid import UUID

    from prefect.input.actions import aread_flow_run_input
    from prefect.input.run_input import keyset_from_base_key

    keyset = keyset_from_base_key(f"suspended-{pause_key}")
    value = await aread_flow_run_input(keyset["response"], flow_run_id=UUID(run_id))
    if not value:
        return False, ""
    form = Approval(**value)
    return form.reject, form.comment


def approvers_comments(decisions: Sequence[Any]) -> str:
    """What the approvers wrote, one ``user: reason`` each, for the run's summary."""
    return "; ".join(f"{d.user}: {d.reason}" for d in decisions if d.decision == "approve" and d.reason)


async def approved_before(ask: Ask, key: Ed25519PublicKey, desk: ApprovalDesk) -> Answer | None:
    """The approval an earlier attempt of this flow run was given (Prefect retried the run after it was
    approved: a crash, the UI's Retry), when it still holds: enough valid signed approvals over the same
    subject (run id, rows' fingerprint, totals, row count). The run then goes on without asking again, and
    replays what it sent (same label, same idempotency keys). None: ask (`ask_approval`)."""
    decisions = await asyncio.to_thread(desk.approvals.decisions, ask.subject.run_id)
    tokens = [d.token for d in decisions if d.decision == "approve"]
    if len(tokens) < ask.need.required:
        return None
    try:
        approvers = check_approvals(key, tokens, ask.subject, ask.need)
    except ApprovalRefused as exc:  # the sheet changed since, or a forged entry: ask again
        logger = get_run_logger()
        logger.warning("the earlier approval of %s no longer holds (%s): asking again", ask.label, exc)
        return None
    comment = approvers_comments(decisions)
    get_run_logger().info(
        "approval carried over from this run's earlier attempt: approved by %s", ", ".join(approvers)
    )
    return Answer(True, comment, approvers)


async def _tell_approved(ask: Ask, desk: ApprovalDesk, approvers: list[str], comment: str) -> None:
    """The run's initiator and uploader are told it is approved (a notice for each, the alert event): the
    rejection, expiry and completion are told from the run's final summary (`flows.payouts`)."""
    who = people(ask.start)
    subject = ask.subject
    text = approved_text(ask.label, approvers, subject.rows, subject.totals, comment)
    await asyncio.to_thread(tell, desk.engine, "run_approved", subject.run_id, ask.label, text, who)
    emit_approved(ask.label, approvers, subject.rows, subject.totals, who)


async def _rejected(ask: Ask, key: Ed25519PublicKey, desk: ApprovalDesk, comment: str) -> Answer:
    run_id = ask.subject.run_id
    decisions = await asyncio.to_thread(desk.approvals.decisions, run_id)
    rejections = [d for d in decisions if d.decision == "reject"]
    rejecter = read_rejecter(key, [d.token for d in rejections], run_id)
    if rejecter and not comment:
        comment = next((d.reason for d in rejections if d.user == rejecter), "")
    who = rejecter or "an unnamed user (Prefect UI or API)"
    get_run_logger().warning(
        "approval decided: rejected by %s: %s; nothing sent", who, comment or "(no comment)"
    )
    await asyncio.to_thread(desk.close, run_id, "rejected", rejecter or "prefect", reason=comment)
    return Answer(False, comment, refusal=Decision(kind="rejected", by=rejecter, reason=comment))


async def _expired(ask: Ask, desk: ApprovalDesk) -> Answer:
    reason = f"no approval within {ask.timeout_s}s"
    get_run_logger().warning("approval decided: %s; nothing sent", reason)
    await asyncio.to_thread(desk.expire, ask.subject.run_id, ask.label, ask.need)
    return Answer(False, reason, refusal=Decision(kind="not_approved", reason=reason))
