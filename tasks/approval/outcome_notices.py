"""What a payout run's initiator (and its uploader, when someone else) is told about the run: approved,
rejected with the approver's comment, not approved in time, completed with its figures, refused, failed.

Each outcome reaches them two ways, and only these two:

- a **notice** in the console for that user alone (store/notices.py, ``user``): the texts are built here, in
  plain words, counts through `tasks.runtime.plurals.counted`, money through `money_text`;
- the run's **alert event** (tasks/events/alerts.py) names them (``started_by``, ``uploaded_by``), so the
  configured automations' messages say whose run it was.

Who they are comes from the run's signed start (tasks/approval/approvals.py, ``read_start``): a run started
in the console, from the CLI or through the payops API has an initiator; a run started from Prefect directly
(UI, API, schedule) has none, and nobody is told by notice (the alerts still go out).

A rejection's comment is an approver's free text: it is quoted on one line and cut to `MAX_COMMENT` characters
here; the console escapes it like every text. It reaches the notice only, never the alert events, whose
payloads carry counts and names, no free text (tasks/events/alerts.py). Nothing here quotes a row, a payee's
number or a secret.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from payops.connectors.payments.models import PAYOUT_FAILED_STATUSES
from payops.store.notices import Notices, recipients
from payops.store.settings import PayopsSettings
from payops.tasks.approval.approval_keys import ApprovalKeyMissing, load_verify_key
from payops.tasks.approval.approvals import ApprovalRefused, Start, read_start
from payops.tasks.events import alerts
from payops.tasks.reports.money_moved import moved_lines
from payops.tasks.runtime.plurals import counted
from payops.tasks.runtime.run_outcomes import REFUSED_OUTCOMES, Outcome
from payops.tasks.wire.money import money_text
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)

MAX_COMMENT = 300
"""An approver's comment is quoted up to this many characters (a rejection reason is capped at 500)."""
MAX_PROBLEMS = 3


# -- who is told -------------------------------------------------------------------------------------------
def people(start: Start) -> dict[str, str | None]:
    """Whom a run's outcome is for: its initiator, and its uploader when someone else (alert payload keys)."""
    uploader = start.uploader if start.uploader and start.uploader != start.initiator else None
    return {"started_by": start.initiator, "uploaded_by": uploader}


def start_of(token: str, source: str, settings: PayopsSettings) -> Start:
    """The run's signed start (no token, a missing key or a forged token: no payops initiator). Reading it
    needs the approval key's public half only."""
    if not token:
        return Start()
    try:
        return read_start(load_verify_key(settings), token, source)
    except (ApprovalKeyMissing, ApprovalRefused, ValueError, OSError, KeyError):
        return Start()


def tell(engine: Any, kind: str, run_id: str | None, label: str, text: str, who: Mapping[str, Any]) -> int:
    """Post the notice to the run's initiator and uploader (``who``, as `people` gives it); best effort: a
    database that cannot be written loses the notice, not the run. Returns how many were posted."""
    names = recipients(who.get("started_by"), who.get("uploaded_by"))
    if not names or not run_id or engine is None:
        return 0
    try:
        return Notices(engine).tell(kind, run_id, label, text, names)
    except SQLAlchemyError as exc:
        log.warning("outcome notice not posted (%s)", type(exc).__name__)
        return 0


# -- the texts ---------------------------------------------------------------------------------------------
def quoted(comment: str, limit: int = MAX_COMMENT) -> str:
    """A person's comment on one line (control characters and runs of spaces made one space), cut to
    ``limit`` characters with an ellipsis."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(comment)).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _amount(value: Any, currency: str = "") -> str | None:
    try:
        return money_text(Decimal(str(value)), currency)
    except (InvalidOperation, ValueError):
        return None


def _totals(totals: Mapping[str, Any]) -> str:
    return ", ".join(t for cur, v in sorted(totals.items()) if (t := _amount(v, cur)))


def approved_text(
    label: str, approvers: Iterable[str], rows: int, totals: Mapping[str, Any], comment: str = ""
) -> str:
    """The run is approved and sends now."""
    by = ", ".join(approvers) or "the approvers"
    said = f" Comments: “{quoted(comment)}”." if comment.strip() else ""  # "bea: amounts match; cat: ok"
    amount = _totals(totals)
    return (
        f"Payout run {label} was approved by {by}: sending {counted(rows, 'payout')}"
        + (f" ({amount})" if amount else "")
        + f".{said}"
    )


def rejected_text(label: str, by: str | None, comment: str, figures: str = "") -> str:
    """An approver rejected the run; their comment quoted."""
    who = by or "someone in the Prefect UI or API"
    why = f": “{quoted(comment)}”" if comment.strip() else " (no reason given)"
    return f"Payout run {label} was rejected by {who}{why}. Nothing was sent{figures}."


def not_approved_text(label: str, reason: str, figures: str = "") -> str:
    """No valid approval: the deadline passed, or the approvals could not be checked."""
    if reason.startswith("no approval within"):
        seconds = "".join(c for c in reason if c.isdigit())
        minutes = max(int(seconds or 0) // 60, 1)
        why = f"nobody approved it within {counted(minutes, 'minute')}"
    else:
        why = quoted(reason, 400) or "no valid approval"
    return (
        f"Payout run {label} was not approved: {why}. Nothing was sent{figures}; start it again if the "
        "payees still need paying."
    )


def _figures(s: Mapping[str, Any]) -> str:
    """`` (6 payouts, GHS 78.00)``: what the run would have paid, for a run that paid nothing."""
    rows = int(s.get("rows_valid") or 0)
    amount = _amount(s.get("amount_total") or 0, str(s.get("currency") or ""))
    return f" ({counted(rows, 'payout')}" + (f", {amount}" if amount and rows else "") + ")" if rows else ""


def completed_text(s: Mapping[str, Any]) -> str:
    """The run's figures: payouts by status, refused, awaiting review, skipped rows, amount and fees."""
    label = s.get("label") or "run"
    by_status = {str(k): int(v) for k, v in (s.get("payouts_by_status") or {}).items()}
    payouts = sum(by_status.values())
    refused = int(s.get("refused_items") or 0)
    review = len(s.get("awaiting_review") or [])
    failed = sum(by_status.get(k, 0) for k in PAYOUT_FAILED_STATUSES) + refused
    parts = [f"{by_status.get('delivered', 0):,} of {counted(payouts, 'payout')} delivered"]
    others = sorted((status, n) for status, n in by_status.items() if status != "delivered")
    parts += [f"{n:,} {status.replace('_', ' ')}" for status, n in others]
    if refused:
        parts.append(f"{refused:,} refused by the service")
    text = f"Payout run {label} completed{' with failures' if failed else ''}: {', '.join(parts)}."
    if review:
        text += f" Awaiting review, followed after the run: {counted(review, 'payout')}."
    invalid = int(s.get("rows_invalid") or 0)
    if invalid:
        text += f" {counted(invalid, 'invalid row')} skipped."
    moved = s.get("moved") or {}
    if moved:  # what left the wallet, per currency (`tasks.reports.money_moved`), not the sheet total
        text += "".join(f" {line[0].upper()}{line[1:]}." for line in moved_lines(moved))
    else:
        currency = str(s.get("currency") or "")
        amount = _amount(s.get("amount_total") or 0, currency)
        fees = _amount(s.get("fee_total") or 0, currency)
        text += f" Amount {amount}, fees {fees}." if amount and fees else ""
    attention = int(s.get("attention_total") or 0)
    if attention:
        text += f" {counted(attention, 'row')} need a look: see the run's page and its reports."
    return text


def refused_text(s: Mapping[str, Any]) -> str:
    """A sheet refused (invalid rows) or a pre-flight that failed: nothing sent."""
    label = s.get("label") or "run"
    if s.get("outcome") == "preflight_failed":
        problems = [quoted(str(p), 200) for p in ((s.get("preflight") or {}).get("problems") or [])]
        shown = "; ".join(problems[:MAX_PROBLEMS]) + ("; …" if len(problems) > MAX_PROBLEMS else "")
        return f"Payout run {label} stopped at the pre-flight: {shown or 'see its page'}. Nothing was sent."
    invalid = int(s.get("rows_invalid") or 0)
    return (
        f"Payout run {label} was refused: the sheet has {counted(invalid, 'invalid row')}. Nothing was sent; "
        "fix them (the run's page has the validation report) and upload the sheet again."
    )


def crashed_text(label: str, error: str, crashed: bool) -> str:
    how = "crashed" if crashed else f"stopped with an error ({error})"
    return (
        f"Payout run {label} {how}. Start it again with the same name: payouts already sent are not paid "
        "twice. The run's page and logs say more."
    )


def outcome_notice(summary: Mapping[str, Any], decision: Any = None) -> tuple[str, str] | None:
    """(notice kind, text) for a run's final summary (``decision``: who rejected it and why, or why it was
    not approved: `flows.summaries.Decision`); None for a dry run."""
    outcome = summary.get("outcome")
    label = str(summary.get("label") or "run")
    if outcome == Outcome.COMPLETED:
        return "run_completed", completed_text(summary)
    if outcome == Outcome.NOT_APPROVED:
        comment = str((summary.get("approval") or {}).get("comment") or "")
        if decision is not None and getattr(decision, "kind", None) == "rejected":
            text = rejected_text(label, decision.by, decision.reason or comment, _figures(summary))
            return "run_rejected", text
        reason = getattr(decision, "reason", None) or comment
        return "run_not_approved", not_approved_text(label, reason, _figures(summary))
    if outcome in REFUSED_OUTCOMES:
        return "run_failed", refused_text(summary)
    return None


# -- the flow's side ---------------------------------------------------------------------------------------
async def tell_outcome(engine: Any, run_id: str | None, summary: Any, who: Mapping[str, Any]) -> int:
    """The notice of a run's final summary (a `PayoutRunSummary`) to its initiator and uploader."""
    data = summary.as_json() if hasattr(summary, "as_json") else dict(summary)
    found = outcome_notice(data, getattr(summary, "decision", None))
    if found is None:
        return 0
    kind, text = found
    return await asyncio.to_thread(tell, engine, kind, run_id, str(data.get("label") or "run"), text, who)


def _params_of(flow_run: Any) -> Mapping[str, Any]:
    params = (flow_run.parameters or {}).get("params") or {}
    if isinstance(params, Mapping):
        return params
    return params.model_dump() if hasattr(params, "model_dump") else {}


async def payout_run_hook(flow: Any, flow_run: Any, state: Any) -> None:
    """Flow-run hook (completion, failure, crash) of `payout-spreadsheet`: a run that ended without its
    summary (an exception, a crash) is told to its initiator and uploader by notice, and emits its alert
    (`alerts.payout_run_hook`) naming them. A run that ends with its summary does both itself."""
    result = await state.aresult(raise_on_failure=False)
    if hasattr(result, "as_json"):
        return
    params = _params_of(flow_run)
    settings = PayopsSettings.from_env()
    token, source = str(params.get("start") or ""), str(params.get("source"))
    start = await asyncio.to_thread(start_of, token, source, settings)
    who = people(start)
    await alerts.payout_run_hook(flow, flow_run, state, people=who)
    if not start.initiator:
        return
    label = str(params.get("label") or flow_run.name)
    error = type(result).__name__ if isinstance(result, BaseException) else str(state.name)
    text = crashed_text(label, error, state.is_crashed())
    try:
        from payops.store import open_database

        engine = await asyncio.to_thread(open_database, settings)
    except Exception as exc:  # noqa: BLE001 - a hook never raises: the database may be anything here
        log.warning("failed-run notice not posted (%s)", type(exc).__name__)
        return
    await asyncio.to_thread(tell, engine, "run_failed", str(flow_run.id), label, text, who)


PAYOUT_RUN_HOOKS: dict[str, list[Any]] = {
    "on_completion": [payout_run_hook],
    "on_failure": [payout_run_hook],
    "on_crashed": [payout_run_hook],
}
"""Keyword arguments of ``@flow`` for `payout-spreadsheet`: the alert and the notice of a run that ended
without its summary."""
