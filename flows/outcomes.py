"""How a run ends: its typed summary's outcome as the Prefect final state a person reads in the runs list.

Every flow ends with ``return end_run(summary)``: the state's type and name say the outcome, its message says
why, and the typed summary (a `flows.summaries.RunSummary`) is the state's data. `run_summary(state)` gives
the summary back (the CLI, tests, hooks): the one accessor.

=============================================  ===========  ========================  =========
outcome (summary)                              state type   state name                exit code
=============================================  ===========  ========================  =========
``completed``, nothing failed                  Completed    ``Completed``             0
``completed``, items failed/refunded/refused   Completed    ``Completed with          0
                                                            failures``
``dry_run``                                    Completed    ``Dry run``               0
``not_approved``, an approver rejected it      Cancelled    ``Rejected``              3
``not_approved``, no valid approval in time    Cancelled    ``Not approved``          3
(timeout, unsigned resume, no signing key)
``invalid_input``, ``preflight_failed``        Cancelled    ``Refused``               2
``incomplete`` (settlements at the deadline)   Completed    ``Incomplete``            1
``policy_alert`` (settlement policy)           Failed       ``Failed``                1
=============================================  ===========  ========================  =========

Why Cancelled for a refused sheet or a run not approved: nothing was sent and nothing went wrong in the
run itself. A Failed state would let Prefect retry the flow (when retries are configured), which would
refuse the same sheet again or pause for approval again; Cancelled is terminal and never retried. Alerts do
not depend on the state type: the payout flow emits its `tasks.events.alerts` event from the summary in
`end_run` (``payops.payout-run.failed`` for a refused sheet, ``payops.payout-run.not-approved`` for a
rejection or no approval), so the automations in ``deployments/automations`` fire as before.
"""

from __future__ import annotations

from typing import Any

from payops.connectors.payments.models import PAYOUT_FAILED_STATUSES, UTILITY_PURCHASE_FAILED_STATUSES
from payops.flows.summaries import PurchaseRunSummary, SettlementRunSummary
from payops.tasks.payouts.run_summary import PayoutRunSummary
from payops.tasks.runtime.plurals import counted
from payops.tasks.runtime.run_outcomes import REFUSED_OUTCOMES, Outcome
from payops.tasks.runtime.run_summary import RowProblem, RunSummary
from prefect.results import ResultRecord
from prefect.states import Cancelled, Completed, Failed, State

COMPLETED, WITH_FAILURES, DRY_RUN = "Completed", "Completed with failures", "Dry run"
REJECTED, NOT_APPROVED, REFUSED, INCOMPLETE = "Rejected", "Not approved", "Refused", "Incomplete"
FAILED = "Failed"
FINAL_STATE_NAMES = (COMPLETED, WITH_FAILURES, DRY_RUN, REJECTED, NOT_APPROVED, REFUSED, INCOMPLETE, FAILED)
"""Every name a payops run's final state takes (`state_name`). Prefect names a state's event after the state's
name (``prefect.flow-run.Not approved``), so an automation that waits for a run's end expects each of these
(deployments/automations/recovery; tests/deployments/test_prefect_yaml.py holds them to it)."""


def failed_items(summary: RunSummary) -> int:
    """Items the service accepted that failed or were refunded, plus items it refused."""
    if isinstance(summary, PayoutRunSummary):
        by_status, failed_statuses = summary.payouts_by_status, PAYOUT_FAILED_STATUSES
    elif isinstance(summary, PurchaseRunSummary):
        by_status, failed_statuses = summary.purchases_by_status, UTILITY_PURCHASE_FAILED_STATUSES
    elif isinstance(summary, SettlementRunSummary):
        failed = set(summary.retries_failed_again)
        if (summary.settlement_outcome or "").startswith("failed"):
            failed.add(summary.run_id or "")
        return len(failed)
    else:
        return 0
    refused = int(getattr(summary, "refused_items", 0) or 0)
    return sum(by_status.get(s, 0) for s in failed_statuses) + refused


def _refusal_reason(summary: RunSummary) -> str:
    if summary.outcome == Outcome.PREFLIGHT_FAILED:
        preflight = getattr(summary, "preflight", None)
        problems = preflight.problems if preflight is not None else []
        return "pre-flight failed: " + ("; ".join(map(str, problems[:3])) or "see the pre-flight artifact")
    errors: list[RowProblem] = getattr(summary, "errors", None) or []
    invalid = getattr(summary, "rows_invalid", 0)
    first = errors[0] if errors else None
    where = ""
    if first is not None:
        where = f"; first: row {first.row}, {first.column}: " if first.row else "; "
        where += first.message
    return f"sheet refused ({counted(invalid, 'invalid row')}){where}"


def state_name(summary: RunSummary) -> str:
    """The final state's name for this summary (the table above)."""
    outcome = summary.outcome
    if outcome == Outcome.DRY_RUN:
        return DRY_RUN
    if outcome == Outcome.NOT_APPROVED:
        decision = getattr(summary, "decision", None)
        return REJECTED if decision is not None and decision.kind == "rejected" else NOT_APPROVED
    if outcome in REFUSED_OUTCOMES:
        return REFUSED
    if outcome == Outcome.INCOMPLETE:
        return INCOMPLETE
    if outcome == Outcome.COMPLETED:
        return WITH_FAILURES if failed_items(summary) else COMPLETED
    return FAILED


def state_message(summary: RunSummary) -> str:
    """One line saying why the run ended so: who rejected and their comment, the first row error, counts."""
    name = state_name(summary)
    label = summary.label or "run"
    if name in (REJECTED, NOT_APPROVED):
        decision = getattr(summary, "decision", None)
        reason = decision.reason if decision is not None else ""
        if name == REJECTED:
            who = f"rejected by {decision.by}" if decision is not None and decision.by else "rejected"
            return f"{label}: {who}" + (f": {reason}" if reason else "") + "; nothing sent"
        return f"{label}: not approved: {reason or 'no valid approval'}; nothing sent"
    if name == REFUSED:
        return f"{label}: {_refusal_reason(summary)}; nothing sent"
    if name == WITH_FAILURES:
        return f"{label}: completed; {counted(failed_items(summary), 'item')} failed or refused"
    return f"{label}: {summary.outcome}"


TONES = {
    COMPLETED: "ok",
    WITH_FAILURES: "warning",
    INCOMPLETE: "warning",
    DRY_RUN: "neutral",
    REJECTED: "warning",
    NOT_APPROVED: "warning",
    REFUSED: "bad",
}
"""How a person should read a final state by its name (the colour of its badge): green only for a run where
nothing went wrong; failures are amber, a refusal red."""


def state_tone(state_type: str, name: str) -> str:
    """``ok``, ``warning``, ``bad``, ``waiting`` or ``neutral`` for a run's state (type as Prefect's
    ``StateType`` value, e.g. ``COMPLETED``): never ``ok`` when something failed."""
    if state_type in ("FAILED", "CRASHED"):
        return "bad"
    if state_type == "PAUSED":
        return "waiting"
    if state_type in ("COMPLETED", "CANCELLED"):
        return TONES.get(name, "neutral")
    return "neutral"


def end_run(summary: RunSummary, message: str | None = None) -> State:
    """The final state of a run: type and name from its outcome (module docstring), the summary as data;
    ``message`` replaces the state's generated message (e.g. the settlement policy's fix)."""
    name, message = state_name(summary), message or state_message(summary)
    if name in (REJECTED, NOT_APPROVED, REFUSED):
        return Cancelled(name=name, message=message, data=summary)
    if name == FAILED:
        return Failed(message=message, data=summary)
    return Completed(name=name, message=message, data=summary)


def run_summary(state: State) -> RunSummary:
    """The typed summary a flow run ended with (its final state's data); TypeError when it has none."""
    data = state.data
    if isinstance(data, ResultRecord):  # in this process: the value itself, no storage read
        data = data.result
    elif not isinstance(data, RunSummary):
        data = state.result(raise_on_failure=False)
    if not isinstance(data, RunSummary):
        raise TypeError(f"the run ended {state.name} without a run summary: {data!r}"[:500])
    return data


async def keep_summary(engine: Any, summary: RunSummary) -> None:
    """Keep a run's summary in the payops database (``engine``; anything else: not opened), by its flow run
    id, where the payops server reads it for whoever started the run (`store.run_summaries`). Best effort:
    the run's work is done and reported either way; a failure is a warning in the run's log."""
    import asyncio

    from payops.store.run_summaries import RunSummaries
    from prefect import get_run_logger
    from prefect.runtime import flow_run
    from sqlalchemy import Engine
    from sqlalchemy.exc import SQLAlchemyError

    if not isinstance(engine, Engine) or not flow_run.id:
        return
    try:
        await asyncio.to_thread(RunSummaries(engine).keep, str(flow_run.id), summary.as_json())
    except SQLAlchemyError as exc:
        get_run_logger().warning("run summary not kept for the server (%s)", type(exc).__name__)
