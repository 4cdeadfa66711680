"""The Prefect events payops emits for every outcome that needs a person (alerts).

Automations (``deployments/automations/*.yaml``) turn these events into messages through a notification block;
this module only says *what happened*, with the facts a message needs. One rule: **a payload carries labels,
counts, totals, ids of runs and report file names, never payee numbers, names, references of rows, or
secrets.** Every payload is built here from counts, so nothing from a row can slip in.

=========================================  =========================================================
event                                      when
=========================================  =========================================================
``payops.payout-run.completed``            a payout run finished (label ``payops.attention``: ``yes``
                                           when payouts failed, were refused or await review)
``payops.payout-run.needs-approval``       a payout run paused for approval
``payops.payout-run.approval-reminder``    a paused run's approval expires soon (``approval_reminder_s``)
``payops.payout-run.approved``             a paused payout run got its approvals and sends now
``payops.payout-run.not-approved``         rejected, or no answer before the approval timeout
``payops.payout-run.failed``               invalid sheet, failed pre-flight, or the run crashed
``payops.settlement.retry-failed``         a settlement retry failed again, or the policy blocks retries
``payops.wallet.low-balance``              a currency crossed below its threshold (``wallet-watch``)
``payops.events.lagging``                  the events catch-up processed events older than its limit
``payops.reconciliation.difference``       a run or daily reconciliation found differences (label
                                           ``payops.scope``: ``run`` or ``day``)
=========================================  =========================================================

Resources are ``payops.payout-run.<label>``, ``payops.settlement.<run id>``, ``payops.wallet.<currency>``,
``payops.events.feed`` and ``payops.reconciliation.<run|day>.<label or date>``; emitted inside a flow run,
an event is related to that run, so templates can link it with ``{{ flow_run|ui_url }}``. Payloads carry
``flow_run_id`` for the console's run page. A payout run's events name whose run it is: ``started_by``
(its initiator, none for a run started from Prefect directly) and ``uploaded_by`` (the sheet's uploader when
someone else), user names only; the same outcome reaches them as a console notice
(`tasks.approval.outcome_notices`). A rejection's comment is free text and stays out of every payload: the
payload says who rejected (``rejected_by``), the notice quotes the comment.

"Once per crossing" (low balance, lagging feed, settlement policy): `Crossings` keeps which alerts are on in a
Prefect Variable; an alert is emitted when its condition turns on, not on every run while it stays on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any

from payops.connectors.payments.models import PAYOUT_FAILED_STATUSES
from payops.store.settings import PayopsSettings
from payops.tasks.events.payment_events import Emitter, default_emitter
from payops.tasks.runtime.run_outcomes import REFUSED_OUTCOMES, Outcome
from payops.tasks.wire.money import money

log = logging.getLogger(__name__)

PAYOUT_RUN = "payops.payout-run"
PAYOUT_COMPLETED = f"{PAYOUT_RUN}.completed"
PAYOUT_NEEDS_APPROVAL = f"{PAYOUT_RUN}.needs-approval"
PAYOUT_APPROVAL_REMINDER = f"{PAYOUT_RUN}.approval-reminder"
PAYOUT_APPROVED = f"{PAYOUT_RUN}.approved"
PAYOUT_NOT_APPROVED = f"{PAYOUT_RUN}.not-approved"
PAYOUT_FAILED = f"{PAYOUT_RUN}.failed"
SETTLEMENT_RETRY_FAILED = "payops.settlement.retry-failed"
WALLET_LOW_BALANCE = "payops.wallet.low-balance"
EVENTS_LAGGING = "payops.events.lagging"
RECONCILIATION_DIFFERENCE = "payops.reconciliation.difference"
ALERTS_TEST = "payops.alerts.test"
EVENT_NAMES = (
    PAYOUT_COMPLETED,
    PAYOUT_NEEDS_APPROVAL,
    PAYOUT_APPROVAL_REMINDER,
    PAYOUT_APPROVED,
    PAYOUT_NOT_APPROVED,
    PAYOUT_FAILED,
    SETTLEMENT_RETRY_FAILED,
    WALLET_LOW_BALANCE,
    EVENTS_LAGGING,
    RECONCILIATION_DIFFERENCE,
)

CROSSINGS_VARIABLE = "payops-alert-crossings"
MAX_PROBLEMS = 5
MAX_TEXT = 200


# -- emitting ---------------------------------------------------------------------------------------------
def _text(value: Any) -> str:
    return str(value)[:MAX_TEXT]


def _money(value: Any) -> str | None:
    return None if value is None else money(Decimal(str(value)))


def _file_names(report_files: Mapping[str, Any] | None) -> dict[str, str]:
    """Report files by kind, as bare file names (folders and URLs may carry bucket names or users)."""
    return {str(k): PurePosixPath(str(v)).name for k, v in (report_files or {}).items()}


def _current_flow_run_id() -> str | None:
    from prefect.runtime import flow_run

    run_id = flow_run.id
    return str(run_id) if run_id else None


def emit_alert(
    event: str,
    resource_id: str,
    name: str,
    payload: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    emitter: Emitter | None = None,
) -> Any:
    """Emit one alert event about resource ``resource_id`` (inside a flow run, related to it)."""
    resource = {"prefect.resource.id": resource_id, "prefect.resource.name": name, **(labels or {})}
    body = {"flow_run_id": _current_flow_run_id(), **payload}
    log.info("alert event %s about %s", event, resource_id)
    return (emitter or default_emitter)(event=event, resource=resource, payload=body)


# -- payout runs ------------------------------------------------------------------------------------------
def _as_dict(summary: Any) -> dict[str, Any]:
    """A run summary as a dict, whether a dict or a pydantic model (a `RunSummary`: its JSON fields)."""
    if hasattr(summary, "as_json"):
        return summary.as_json()
    if hasattr(summary, "model_dump"):
        return summary.model_dump(mode="json")
    return dict(summary or {})


def _count(value: Any) -> int:
    """A count, or the length of a list the summary keeps instead (references are never sent)."""
    if isinstance(value, list | tuple | set | dict):
        return len(value)
    return int(value or 0)


def payout_facts(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The facts of a payout run summary a message may carry (counts and totals only)."""
    by_status = {str(k): int(v) for k, v in (summary.get("payouts_by_status") or {}).items()}
    preflight = summary.get("preflight") or {}
    return {
        "label": _text(summary.get("label") or ""),
        "outcome": summary.get("outcome"),
        "rows_total": _count(summary.get("rows_total")),
        "rows_valid": _count(summary.get("rows_valid")),
        "rows_invalid": _count(summary.get("rows_invalid")),
        "batches": _count(summary.get("batches")),
        "amount_total": summary.get("amount_total"),
        "fee_total": summary.get("fee_total"),
        "moved": summary.get("moved") or {},  # paid, not paid, fees charged by currency (money_moved)
        "payouts": sum(by_status.values()),
        "delivered": by_status.get("delivered", 0),
        "failed": by_status.get("failed", 0),
        "refunded": by_status.get("refunded", 0),
        "refused": _count(summary.get("refused_items")),
        "awaiting_review": _count(summary.get("awaiting_review")),
        "not_final": _count(summary.get("not_final")),
        "problems": [_text(p) for p in (preflight.get("problems") or [])[:MAX_PROBLEMS]],
        "report_files": _file_names(summary.get("report_files")),
    }


def needs_attention(facts: Mapping[str, Any]) -> bool:
    """A finished run a person should look at: failures, refusals, reviews, stragglers or skipped rows."""
    keys = (*sorted(PAYOUT_FAILED_STATUSES), "refused", "awaiting_review", "not_final", "rows_invalid")
    return any(facts.get(k) for k in keys)


def payout_run_event(summary: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(event name, facts) for a finished payout run; None for a dry run."""
    facts = payout_facts(summary)
    outcome = facts["outcome"]
    if outcome == Outcome.COMPLETED:
        return PAYOUT_COMPLETED, facts
    if outcome == Outcome.NOT_APPROVED:
        comment = str((summary.get("approval") or {}).get("comment") or "")
        facts["reason"] = "timeout" if comment.startswith("no approval within") else "rejected"
        return PAYOUT_NOT_APPROVED, facts
    if outcome in REFUSED_OUTCOMES:
        return PAYOUT_FAILED, facts
    return None


def _people(people: Mapping[str, Any] | None) -> dict[str, str | None]:
    """Whose run it is (user names, never anything else): ``started_by``, ``uploaded_by``."""
    given = people or {}
    return {k: _text(given[k]) if given.get(k) else None for k in ("started_by", "uploaded_by")}


def _emit_payout(event: str, facts: dict[str, Any], emitter: Emitter | None = None) -> Any:
    label = facts["label"] or "unlabelled"
    labels = {"payops.label": label, "payops.attention": "yes" if needs_attention(facts) else "no"}
    return emit_alert(event, f"{PAYOUT_RUN}.{label}", label, facts, labels, emitter)


def emit_payout_outcome(
    summary: Any, emitter: Emitter | None = None, people: Mapping[str, Any] | None = None
) -> Any:
    """Emit the event of a finished payout run summary (dict or pydantic model); ``people``: whose run it is
    (`tasks.approval.outcome_notices.people`). A rejection names who rejected it, never their comment."""
    found = payout_run_event(_as_dict(summary))
    if not found:
        return None
    event, facts = found
    facts.update(_people(people))
    decision = getattr(summary, "decision", None)
    if event == PAYOUT_NOT_APPROVED and getattr(decision, "kind", None) == "rejected":
        facts["rejected_by"] = _text(decision.by) if decision.by else None
    return _emit_payout(event, facts, emitter)


def emit_approved(
    label: str,
    approvers: Iterable[str],
    rows: int,
    totals: Mapping[str, Any],
    people: Mapping[str, Any] | None = None,
    emitter: Emitter | None = None,
) -> Any:
    """A paused payout run got its approvals and sends now: who approved, how many payouts, totals per
    currency (approvers' comments stay out: free text)."""
    facts = {
        "label": _text(label),
        "outcome": "approved",
        "approvers": [_text(a) for a in approvers],
        "payouts": int(rows),
        "totals": {cur: _money(v) for cur, v in sorted(totals.items())},
        **_people(people),
    }
    return _emit_payout(PAYOUT_APPROVED, facts, emitter)


def emit_needs_approval(label: str, preflight: Any, timeout_s: int, emitter: Emitter | None = None) -> Any:
    """A payout run is about to pause for approval: its totals per currency and the pre-flight findings."""
    currencies = {
        cur: {"payouts": c.count, "amount": _money(c.amount), "fees": _money(c.fees)}
        for cur, c in preflight.currencies.items()
    }
    facts = {
        "label": _text(label),
        "outcome": "awaiting_approval",
        "payouts": sum(c.count for c in preflight.currencies.values()),
        "amount_total": _money(preflight.amount_total),
        "fee_total": _money(preflight.fee_total),
        "currencies": currencies,
        "problems": [_text(p) for p in preflight.problems[:MAX_PROBLEMS]],
        "approval_timeout_s": timeout_s,
    }
    return _emit_payout(PAYOUT_NEEDS_APPROVAL, facts, emitter)


def emit_approval_reminder(label: str, seconds_left: int, emitter: Emitter | None = None) -> Any:
    """A paused payout run's approval expires in ``seconds_left``: nothing is sent without it."""
    facts = {"label": _text(label), "outcome": "awaiting_approval", "seconds_left": int(seconds_left)}
    return _emit_payout(PAYOUT_APPROVAL_REMINDER, facts, emitter)


async def payout_run_hook(
    flow: Any, flow_run: Any, state: Any, people: Mapping[str, Any] | None = None
) -> None:
    """Flow-run hook (completion, failure, crash) of `payout-spreadsheet`: the alert of a run that ended
    without its summary (an exception or a crash). A run that ends with its summary emits its own event
    (`emit_payout_outcome`, called by the flow, whatever the final state's type: a Cancelled state runs no
    hook). The event says only the exception type (its message could quote a row) and the run's label.
    """
    result = await state.aresult(raise_on_failure=False)
    if hasattr(result, "as_json"):
        return
    params = (flow_run.parameters or {}).get("params") or {}
    label = params.get("label") if isinstance(params, Mapping) else getattr(params, "label", None)
    facts = {
        "label": _text(label or flow_run.name),
        "outcome": "crashed" if state.is_crashed() else "error",
        "error": type(result).__name__ if isinstance(result, BaseException) else _text(state.name),
        "problems": [],
        "report_files": {},
        **_people(people),
    }
    _emit_payout(PAYOUT_FAILED, facts)


PAYOUT_RUN_HOOKS: dict[str, list[Any]] = {
    "on_completion": [payout_run_hook],
    "on_failure": [payout_run_hook],
    "on_crashed": [payout_run_hook],
}
"""Hooks emitting the alert of a run that ended without its summary. `payout-spreadsheet` uses
`tasks.approval.outcome_notices.PAYOUT_RUN_HOOKS`, which calls `payout_run_hook` naming whose run it was and
tells them by notice too."""


# -- settlements ------------------------------------------------------------------------------------------
def settlement_retry_facts(result: Any, label: str, report_files: Mapping[str, Any]) -> dict[str, Any]:
    run, retry = result.run, result.retry
    facts: dict[str, Any] = {
        "label": label,
        "run_id": run.id,
        "run_outcome": run.outcome,
        "currency": run.currency,
        "total": _money(run.total),
        "items": run.item_count,
        "report_files": _file_names(report_files),
    }
    if retry is not None:
        facts.update(reason="failed_again", retry_id=retry.id, retry_outcome=retry.outcome)
        facts.update(retry_total=_money(retry.total), retry_items=retry.item_count)
    else:
        facts.update(reason="policy", code=result.code)
    return facts


async def emit_settlement_alerts(
    label: str,
    results: Iterable[Any],
    report_files: Mapping[str, Any],
    crossings: Crossings | None = None,
    emitter: Emitter | None = None,
) -> int:
    """Alerts of one settlement retry run: each retry made *now* that failed again, and the settlement
    policy blocking retries (once, until a retry run passes without that block). Returns events emitted."""
    results = list(results)
    emitted = 0
    for r in results:
        if r.action == "retried" and r.retry is not None and r.retry.failed:
            facts = settlement_retry_facts(r, label, report_files)
            emit_alert(
                SETTLEMENT_RETRY_FAILED,
                f"payops.settlement.{r.run.id}",
                r.run.reference,
                facts,
                None,
                emitter,
            )
            emitted += 1
    blocked = next((r for r in results if r.action == "alert"), None)
    crossings = crossings or Crossings()
    if await crossings.turned_on("settlement-policy", blocked is not None) and blocked is not None:
        facts = settlement_retry_facts(blocked, label, report_files)
        facts["not_attempted"] = sum(1 for r in results if r.action == "not_attempted")
        emit_alert(
            SETTLEMENT_RETRY_FAILED,
            f"payops.settlement.{blocked.run.id}",
            blocked.run.reference,
            facts,
            None,
            emitter,
        )
        emitted += 1
    return emitted


# -- crossings (once per crossing) ------------------------------------------------------------------------
@dataclass
class Crossings:
    """Which alert conditions are on, kept in a Prefect Variable (JSON object ``{key: true}``).

    `turned_on(key, on)` records the condition and answers True only when it goes from off to on; turning off
    re-arms it. Keys are short (``wallet:GHS``, ``events-lagging``), so the variable stays far below Prefect's
    5,000-character limit. ``memory`` replaces the variable in tests of the pure logic.
    """

    variable: str = CROSSINGS_VARIABLE
    memory: dict[str, bool] | None = None

    async def _load(self) -> dict[str, bool]:
        if self.memory is not None:
            return dict(self.memory)
        from prefect.variables import Variable

        value = await Variable.aget(self.variable, default={})
        return {str(k): bool(v) for k, v in (value or {}).items()} if isinstance(value, dict) else {}

    async def _save(self, state: dict[str, bool]) -> None:
        if self.memory is not None:
            self.memory.clear()
            self.memory.update(state)
            return
        from prefect.variables import Variable

        await Variable.aset(self.variable, state, overwrite=True)

    async def turned_on(self, key: str, on: bool) -> bool:
        state = await self._load()
        was_on = state.get(key, False)
        if was_on != on:
            if on:
                state[key] = True
            else:
                state.pop(key, None)
            await self._save(state)
        return on and not was_on


# -- wallet ----------------------------------------------------------------------------------------------
def emit_low_balance(
    watch: Any, horizon_hours: float, upcoming_runs: int, emitter: Emitter | None = None
) -> Any:
    """A currency crossed below its threshold (a `tasks.ledger.wallet_watch.CurrencyWatch`)."""
    facts = {
        "currency": watch.currency,
        "available": _money(watch.available),
        "upcoming": _money(watch.upcoming),
        "after_upcoming": _money(watch.after_upcoming),
        "threshold": _money(watch.threshold),
        "daily_remaining": _money(watch.daily_remaining),
        "monthly_remaining": _money(watch.monthly_remaining),
        "horizon_hours": horizon_hours,
        "upcoming_runs": upcoming_runs,
        "reasons": [_text(r) for r in watch.reasons[:MAX_PROBLEMS]],
    }
    return emit_alert(
        WALLET_LOW_BALANCE,
        f"payops.wallet.{watch.currency}",
        f"wallet {watch.currency}",
        facts,
        None,
        emitter,
    )


# -- events feed ------------------------------------------------------------------------------------------
def lag_alert_after(settings: PayopsSettings) -> timedelta:
    """How old a caught-up event may be before the feed counts as lagging
    (``PAYOPS_EVENTS_LAG_ALERT_MINUTES``, default 15 minutes)."""
    return timedelta(minutes=settings.events_lag_alert_minutes)


async def emit_events_lag(
    summary: Mapping[str, Any],
    limit: timedelta,
    now: datetime | None = None,
    crossings: Crossings | None = None,
    emitter: Emitter | None = None,
) -> bool:
    """Emit `payops.events.lagging` when the catch-up had to emit events older than ``limit`` (the webhooks
    and the schedule both missed them), once per crossing. True when emitted."""
    now = now or datetime.now(UTC)
    oldest = summary.get("oldest_emitted_at")
    oldest_at = datetime.fromisoformat(oldest) if isinstance(oldest, str) else oldest
    lag = now - oldest_at if oldest_at is not None else timedelta(0)
    lagging = lag > limit
    if not await (crossings or Crossings()).turned_on("events-lagging", lagging):
        return False
    facts = {
        "lag_minutes": round(lag.total_seconds() / 60, 1),
        "limit_minutes": round(limit.total_seconds() / 60, 1),
        "events_emitted": int(summary.get("events_emitted") or 0),
        "restarted_without_cursor": bool(summary.get("restarted_without_cursor")),
        "cursor_variable": _text(summary.get("variable") or ""),
    }
    emit_alert(EVENTS_LAGGING, "payops.events.feed", "payments events feed", facts, None, emitter)
    return True


async def events_catch_up_hook(flow: Any, flow_run: Any, state: Any) -> None:
    """Completion hook of `events-catch-up` (an entry point: Prefect calls it in the flow's process): the lag
    check on the run's summary, against the limit the settings give."""
    summary = await state.aresult(raise_on_failure=False)
    if hasattr(summary, "as_json"):  # the flow's EventsCatchUpSummary
        summary = summary.as_json()
    if isinstance(summary, Mapping):
        await emit_events_lag(summary, lag_alert_after(PayopsSettings.from_env()))


# -- reconciliation ---------------------------------------------------------------------------------------
def emit_reconciliation_difference(
    scope: str,
    key: str,
    status: str,
    by_kind: Mapping[str, int],
    report_files: Mapping[str, Any] | None = None,
    emitter: Emitter | None = None,
) -> Any:
    """A run (``scope`` run, ``key`` its label) or a day (``day``, ``YYYY-MM-DD``) reconciled with
    differences: counts by kind and report file names, never the references involved."""
    payload = {
        "scope": scope,
        "key": _text(key),
        "status": status,
        "differences": sum(int(v) for v in by_kind.values()),
        "by_kind": {str(k): int(v) for k, v in by_kind.items()},
        "report_files": _file_names(report_files),
    }
    return emit_alert(
        RECONCILIATION_DIFFERENCE,
        f"payops.reconciliation.{scope}.{key}",
        str(key),
        payload,
        {"payops.scope": scope},
        emitter,
    )
