"""Flows `reconcile-run` and `reconcile-day`: a payout run, or the day's wallet, matched to the service.

`reconcile-run` checks one run (by label, or by the reference of a payout that changed: the deployment's
trigger on ``payments.payout.status_changed`` events from the webhook inbox or the events catch-up); the
payout flow runs the same check when it ends (`tasks.ledger.run_reconciliation.reconcile_at_run_end`).
`reconcile-day` is the daily close (`tasks.ledger.daily_close`), scheduled at 00:10 Africa/Accra for the day
just ended. Both store the check in the payops database (`payops reconcile history` lists them), emit
``payops.reconciliation.difference`` when they find differences, and publish a Prefect artifact.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from payops.flows.flow_decorator import flow
from payops.flows.outcomes import end_run, keep_summary
from payops.flows.run_params import (
    DEFAULT_RATE_PER_S,
    FORM_CONFIG,
    CredentialsBlock,
    RateLimit,
    ReportDir,
    Text,
)
from payops.flows.summaries import DifferenceRow, ReconciliationSummary
from payops.store.reconciliation import Difference
from payops.store.settings import PayopsSettings
from payops.tasks.events.alerts import emit_reconciliation_difference
from payops.tasks.ledger.daily_close import LOOKBACK, business_day, run_close_task, write_close_reports
from payops.tasks.ledger.run_reconciliation import KINDS, label_for_reference, open_store, reconcile_run_task
from payops.tasks.reports.artifacts import artifact_key, markdown_table, report_lines
from payops.tasks.runtime.clients import open_clients
from payops.tasks.runtime.credentials import load_settings
from payops.tasks.runtime.run_meter import RunMeter
from payops.tasks.runtime.run_outcomes import Outcome
from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact
from prefect.states import State
from pydantic import BaseModel, Field, model_validator


class ReconcileRunParams(BaseModel):
    """Parameters of `reconcile-run`."""

    model_config = FORM_CONFIG

    label: Text = Field("", description="The payout run's label. Leave empty to give a payout reference.")
    reference: Text = Field(
        "",
        description="A payout reference of the run (the webhook trigger gives it). Empty with a label.",
    )
    unchecked_after_hours: float = Field(
        24,
        ge=0,
        description="A final payout the platform has not checked after this many hours is a difference.",
    )
    credentials_block: CredentialsBlock = ""
    rate_limit_per_s: RateLimit = DEFAULT_RATE_PER_S
    trigger: Literal["cli", "api"] | None = Field(
        None,
        description="Who asked for the check, as the reconciliation history shows it. Leave empty: a person "
        "(cli) with a label, a payout's change (event) with a reference.",
    )

    @model_validator(mode="after")
    def _one_of(self) -> ReconcileRunParams:
        if not self.label and not self.reference:
            raise ValueError("give the run's label or one of its payout references")
        return self


def _difference_rows(differences: list[Difference]) -> list[DifferenceRow]:
    """The summary's ``differences_list``: the first 500 differences."""
    return [DifferenceRow(**d.as_dict()) for d in differences[:500]]


def _differences_table(differences: list[Any], limit: int = 200) -> str:
    rows = [
        [d.kind, d.reference, d.label, d.currency, d.expected, d.actual, d.detail]
        for d in differences[:limit]
    ]
    return markdown_table(["kind", "reference", "run", "currency", "expected", "actual", "detail"], rows)


@flow(name="reconcile-run", log_prints=False)
async def reconcile_run(params: ReconcileRunParams) -> State:
    """Match one payout run with the service's payouts and transactions now; store and report the check.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `ReconciliationSummary`."""
    payops = PayopsSettings.from_env()
    async with open_clients(payops):
        summary = await _reconcile_run(params, payops)
    await _keep(payops, summary)
    return end_run(summary)


async def _reconcile_run(params: ReconcileRunParams, payops: PayopsSettings) -> ReconciliationSummary:
    logger = get_run_logger()
    label = params.label
    trigger = params.trigger or ("cli" if label else "event")
    if not label:
        store = await asyncio.to_thread(open_store, payops)
        label = await label_for_reference(store, params.reference) or ""
        run = await asyncio.to_thread(store.run, label) if label else None
        if not label:
            logger.info("payout %s belongs to no recorded payops run: nothing to reconcile", params.reference)
            return ReconciliationSummary(
                label=None, outcome=Outcome.COMPLETED, scope="run", status="not_a_payops_run"
            )
        if run is not None and run.ended_at is None:
            logger.info("run %s is still sending: its own end reconciles it", label)
            return ReconciliationSummary(
                label=label, outcome=Outcome.COMPLETED, scope="run", status="in_progress"
            )
    settings = load_settings(params.credentials_block, payops)
    meter = RunMeter()
    check = await reconcile_run_task(
        settings, payops, label, trigger, params.unchecked_after_hours * 3600, params.rate_limit_per_s
    )
    summary = ReconciliationSummary(
        label=label,
        outcome=Outcome.COMPLETED,
        scope="run",
        # the check's figures, as the payout run's summary holds them (`RunReconciliationFigures`)
        **check.summary.model_dump(exclude_unset=True),
        check_id=check.check_id,
        differences_list=_difference_rows(check.differences),
        api_calls=dict(sorted(check.api_calls.items())),
        duration_s=meter.elapsed,
    )
    s = summary
    lines = [f"# Reconciliation of run `{label}`", "", f"**Status:** {s.status} ({s.trigger})", ""]
    lines.append(
        markdown_table(
            ["rows", "matched", "open", "differences"], [[s.rows, s.matched, s.open, s.differences]]
        )
    )
    if check.differences:
        lines += ["", "## Differences", "", _differences_table(check.differences)]
        emit_reconciliation_difference("run", label, s.status or "", s.by_kind)
        logger.warning(
            "run %s reconciled with %d difference(s): %s", label, len(check.differences), s.by_kind
        )
    else:
        logger.info("run %s reconciled: %s", label, s.status)
    await acreate_markdown_artifact(
        key=artifact_key(label, "reconciliation"),
        markdown="\n".join(lines),
        description=f"Reconciliation of {label}",
    )
    return summary


class ReconcileDayParams(BaseModel):
    """Parameters of `reconcile-day`."""

    model_config = FORM_CONFIG | {"populate_by_name": True}

    day: date | None = Field(
        None,
        alias="date",
        description="The business day closed (Africa/Accra). Leave empty for the day just ended.",
    )
    unchecked_after_hours: float = Field(
        24,
        ge=0,
        description="A final transaction the platform has not checked after this many hours is a difference.",
    )
    lookback_days: float = Field(
        LOOKBACK.days,
        gt=0,
        le=90,
        description="How far back late refunds, mismatches and a first close look.",
    )
    report_dir: ReportDir = ""
    credentials_block: CredentialsBlock = ""
    rate_limit_per_s: RateLimit = DEFAULT_RATE_PER_S
    trigger: Literal["schedule", "cli", "api"] | None = Field(
        None,
        description="Who asked for the close, as the reconciliation history shows it. Leave empty: the "
        "schedule for the day just ended, else a person.",
    )


@flow(name="reconcile-day", log_prints=False)
async def reconcile_day(params: ReconcileDayParams = ReconcileDayParams()) -> State:
    """The daily close: snapshot, match, attribute, store, report (xlsx/csv/JSON, an artifact), alert.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `ReconciliationSummary`."""
    payops = PayopsSettings.from_env()
    async with open_clients(payops):
        summary = await _reconcile_day(params, payops)
    await _keep(payops, summary)
    return end_run(summary)


async def _keep(payops: PayopsSettings, summary: ReconciliationSummary) -> None:
    """The check's summary for the payops server (`flows.outcomes.keep_summary`), on the run's database."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        store = await asyncio.to_thread(open_store, payops)
    except (SQLAlchemyError, RuntimeError, ValueError, OSError) as exc:  # the check is stored and reported
        get_run_logger().warning("run summary not kept for the server (%s)", type(exc).__name__)
        return
    await keep_summary(store.engine, summary)


async def _reconcile_day(params: ReconcileDayParams, payops: PayopsSettings) -> ReconciliationSummary:
    logger = get_run_logger()
    meter = RunMeter()
    now = datetime.now(UTC)
    day = params.day or business_day(now) - timedelta(days=1)
    if day > business_day(now):
        raise ValueError(f"date {day} is in the future (today in Accra is {business_day(now)})")
    settings = load_settings(params.credentials_block, payops)
    close = await run_close_task(
        settings,
        payops,
        day.isoformat(),
        params.trigger or ("schedule" if params.day is None else "cli"),
        params.unchecked_after_hours * 3600,
        params.lookback_days * 86400,
        params.rate_limit_per_s,
    )
    meter.phase("close")
    result = close.result
    label = f"reconciliation-{day.isoformat()}"
    summary = ReconciliationSummary(
        label=label,
        outcome=Outcome.COMPLETED,
        scope="day",
        **result.summary(),  # the close's figures (`tasks.ledger.daily_close.CloseResult.summary`)
        check_id=close.check_id,
        differences_list=_difference_rows(result.differences),
        api_calls=dict(sorted(close.api_calls.items())),
    )
    summary.report_files = report_files = await asyncio.to_thread(
        write_close_reports, params.report_dir or payops.reports, label, result, summary.as_json()
    )
    meter.phase("report")
    summary.phase_durations_s, summary.duration_s = meter.phases, meter.elapsed
    by_kind = summary.by_kind
    lines = [f"# Daily close {day.isoformat()}", "", f"**Status:** {result.status}", ""]
    lines.append(
        markdown_table(
            ["currency", "balance", "reserved", "change", "movements", "unexplained"],
            [
                [c, v["balance"], v["reserved"], v.get("change"), v.get("movements"), v.get("unexplained")]
                for c, v in result.balances.items()
            ],
        )
    )
    lines += [
        "",
        f"{summary.transactions} transaction(s) since {summary.from_}; "
        f"{summary.outside_payops} outside payops.",
    ]
    if result.differences:
        lines += ["", "## Differences", "", _differences_table(result.differences)]
        emit_reconciliation_difference("day", day.isoformat(), result.status, by_kind, report_files)
        logger.warning("close %s: %d difference(s): %s", day, len(result.differences), by_kind)
    lines += report_lines(report_files, payops)
    await acreate_markdown_artifact(
        key=f"reconciliation-{day.isoformat()}", markdown="\n".join(lines), description=label
    )
    logger.info("close %s: %s, %d transactions", day, result.status, summary.transactions)
    return summary


__all__ = ["KINDS", "ReconcileDayParams", "ReconcileRunParams", "reconcile_day", "reconcile_run"]
