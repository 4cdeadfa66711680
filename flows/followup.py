"""Flow `payout-followup`: the payouts a finished run left waiting (in review, held), followed afterwards.

A payout run ends once its payouts are final or have waited for a person past the settle window
(`tasks.payouts.polling`). This flow reads those payouts again and, when one moved, rewrites the run's JSON
summary and its run record (`tasks.payouts.followup`). The `payout-followup` deployment runs it when a payment
webhook (or the events catch-up) reports a payout status change, and hourly; `payops payouts followup LABEL`
runs it by hand.
"""

from __future__ import annotations

from payops.flows.flow_decorator import flow
from payops.flows.outcomes import end_run
from payops.flows.run_params import FORM_CONFIG, CredentialsBlock, ReportDir, Text
from payops.flows.summaries import FollowupSummary
from payops.store.settings import PayopsSettings
from payops.tasks.payouts.followup import FollowupRefused, follow_up_task, update_run_record, waiting_runs
from payops.tasks.reports.run_reports import report_root
from payops.tasks.runtime.clients import open_clients
from payops.tasks.runtime.credentials import load_settings
from payops.tasks.runtime.run_outcomes import Outcome
from prefect import get_run_logger
from prefect.states import State
from pydantic import BaseModel, Field


class FollowupParams(BaseModel):
    """Parameters of `payout-followup`."""

    model_config = FORM_CONFIG

    label: Text = Field(
        "", description="The payout run to follow up. Leave empty for every recent run with payouts waiting."
    )
    reference: Text = Field(
        "",
        description="A payout that moved (from a payment webhook): only runs waiting for it are read again. "
        "Leave empty to read every waiting payout.",
    )
    report_dir: ReportDir = ""
    credentials_block: CredentialsBlock = ""
    recent_runs: int = Field(50, ge=1, le=500, description="Recent runs looked at when no label is given.")


@flow(name="payout-followup", log_prints=False)
async def payout_followup(params: FollowupParams = FollowupParams()) -> State:
    """Read the waiting payouts of one run (or of every recent run with some) again; update what moved."""
    logger = get_run_logger()
    payops = PayopsSettings.from_env()
    settings = load_settings(params.credentials_block, payops)
    if params.label:
        targets = [(params.label, report_root(params.report_dir or payops.reports))]
    else:
        targets = await waiting_runs(params.recent_runs)
    moved: dict[str, dict[str, list[str]]] = {}
    waiting = 0
    notes: list[str] = []
    async with open_clients(payops):
        for label, report_dir in targets:
            try:
                result = await follow_up_task(settings, report_dir, label, params.reference)
            except FollowupRefused as exc:
                notes.append(f"{label}: {exc}")
                logger.warning("follow-up of %s: %s", label, exc)
                continue
            waiting += len(result.still_waiting)
            if not result.moved:
                continue
            moved[label] = {ref: list(change) for ref, change in result.moved.items()}
            if not await update_run_record(label, result.summary):
                notes.append(f"{label}: no run record to update (its JSON summary was)")
            logger.info(
                "run %s: %s; %d still waiting",
                label,
                ", ".join(f"{r} {a} -> {b}" for r, (a, b) in result.moved.items()),
                len(result.still_waiting),
            )
    summary = FollowupSummary(
        label=params.label or None,
        outcome=Outcome.COMPLETED,
        runs_checked=len(targets),
        moved=moved,
        still_waiting=waiting,
        notes=notes,
    )
    return end_run(summary)
