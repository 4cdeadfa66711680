"""Flows `retry-failed-settlements` and `settle-now`.

Retry: list the settlement runs of a window (or one run by id or reference), retry each failed run exactly
once (stable reference and Idempotency-Key, see `tasks.settlements`), poll the new runs and report.
A settlement policy that cannot be paid out (422 policy_missing_provider / policy_not_nettable) is an alert:
an error log, a markdown artifact and a Failed state naming the fix; nothing is retried in a loop.
The event trigger for the deployment is documented in `tasks.settlements`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from payops.connectors.payments import PaymentsSettings
from payops.connectors.payments.models import REFERENCE_PATTERN
from payops.flows.flow_decorator import flow
from payops.flows.outcomes import end_run
from payops.flows.run_params import FORM_CONFIG, CredentialsBlock, RateLimit, ReportDir, Text
from payops.flows.summaries import SettlementAlert, SettlementRunSummary
from payops.store.settings import PayopsSettings
from payops.tasks.events.alerts import emit_settlement_alerts
from payops.tasks.reports.artifacts import markdown_table, report_lines
from payops.tasks.reports.tabular_reports import write_table_reports
from payops.tasks.runtime.clients import open_clients
from payops.tasks.runtime.credentials import load_settings
from payops.tasks.runtime.plurals import counted
from payops.tasks.runtime.run_meter import RunMeter
from payops.tasks.runtime.run_outcomes import Outcome
from payops.tasks.settlements import (
    POLICY_FIX,
    RETRYABLE_OUTCOMES,
    RetryResult,
    RunInfo,
    Scan,
    poll_settlements_task,
    resettle_task,
    run_row_action,
    scan_settlements_task,
    settle_now_task,
)
from payops.tasks.wire.money import money
from payops.tasks.wire.references import resettlement_reference, settle_now_reference
from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact
from prefect.states import State
from pydantic import BaseModel, Field

REPORT_HEADERS = [
    "run id",
    "reference",
    "started at",
    "status",
    "outcome",
    "items",
    "total",
    "currency",
    "action",
    "reason",
    "retry run id",
    "retry reference",
    "retry status",
    "retry outcome",
    "retry total",
    "retry completed at",
]


class SettlementRetryParams(BaseModel):
    """Parameters of `retry-failed-settlements`."""

    model_config = FORM_CONFIG

    since: datetime | None = Field(
        None,
        description="Oldest settlement run start to look at. Leave empty to look back `since_days` days.",
    )
    since_days: float = Field(7, gt=0, description="Days to look back when no start is given.")
    run_id: Text = Field("", description="Retry only the settlement run with this id. Leave empty for all.")
    run_reference: Text = Field(
        "",
        description="Retry only the settlement run with this reference (a webhook-triggered run fills it "
        "in). Leave empty for all.",
    )
    poll_deadline_s: float = Field(
        300,
        gt=0,
        description="Seconds to follow new settlement runs to completion; unfinished ones are reported.",
    )
    report_dir: ReportDir = ""
    credentials_block: CredentialsBlock = ""
    rate_limit_per_s: RateLimit = 50


class SettleNowParams(BaseModel):
    """Parameters of `settle-now`."""

    model_config = FORM_CONFIG

    reference: Text = Field(
        "",
        pattern=rf"^$|{REFERENCE_PATTERN}",
        description="Reference of the settlement run (letters, digits, - and _). Leave empty to derive one "
        "from this flow run, so a retry of the same run never settles twice.",
    )
    currency: Text = Field(
        "",
        pattern=r"^([A-Z]{3})?$",
        description="Currency to settle (e.g. GHS). Leave empty for the currencies of the settlement policy.",
    )
    poll_deadline_s: float = Field(
        300,
        gt=0,
        description="Seconds to follow the settlement run to completion; if unfinished it is reported.",
    )
    report_dir: ReportDir = ""
    credentials_block: CredentialsBlock = ""
    rate_limit_per_s: RateLimit = 50


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment else None


def _run_cells(run: RunInfo | None) -> list[Any]:
    if run is None:
        return [None] * 8
    return [
        run.id,
        run.reference,
        _iso(run.started_at),
        run.status,
        run.outcome,
        run.item_count,
        money(run.total),
        run.currency,
    ]


def _retry_cells(result: RetryResult | None) -> list[Any]:
    retry = result.retry if result else None
    if retry is None:
        return [None, resettlement_reference(result.run.id) if result else None, None, None, None, None]
    return [
        retry.id,
        retry.reference,
        retry.status,
        retry.outcome,
        money(retry.total),
        _iso(retry.completed_at),
    ]


def report_rows(runs: list[RunInfo], results: dict[str, RetryResult]) -> list[list[Any]]:
    """One row per run seen (and per run asked for but not listed), with its action, reason and retry."""
    retry_of = {resettlement_reference(r.id): r.id for r in runs if r.failed}
    rows: list[list[Any]] = []
    listed = {r.id for r in runs}
    extra = [res.run for rid, res in results.items() if rid not in listed]
    for run in [*runs, *extra]:
        action, reason = run_row_action(run, results, retry_of)
        rows.append([*_run_cells(run), action, reason, *_retry_cells(results.get(run.id))])
    return rows


NOT_RETRIED_ACTIONS = frozenset({"skipped", "alert", "not_attempted"})
"""A failed run's actions that leave it failed: a person looks at it."""


def needs_a_look(row: list[Any]) -> bool:
    """A report row to highlight: its failed run was not retried, or its retry failed again (read by column
    name: `REPORT_HEADERS`)."""
    cell = dict(zip(REPORT_HEADERS, row, strict=True))
    return cell["action"] in NOT_RETRIED_ACTIONS or cell["retry outcome"] in RETRYABLE_OUTCOMES


#: the table artifact's columns, most important first (the xlsx/csv report keeps all of REPORT_HEADERS)
TABLE_HEADERS = [
    "run id",
    "outcome",
    "total",
    "currency",
    "status",
    "action",
    "retry run id",
    "retry outcome",
]


def table_rows(rows: list[list[Any]]) -> list[dict[str, Any]]:
    """The table artifact's rows: `TABLE_HEADERS` of each report row."""
    idx = [REPORT_HEADERS.index(h) for h in TABLE_HEADERS]
    return [{h: r[i] for h, i in zip(TABLE_HEADERS, idx, strict=True)} for r in rows]


def summary_markdown(
    title: str, summary: dict[str, Any], rows: list[list[Any]], payops: PayopsSettings
) -> str:
    lines = [f"# {title}", "", f"**Outcome:** {summary['outcome']}", ""]
    settled = bool(summary.get("run_id") and "status" in summary)
    if settled:  # settle-now: its one run, most important columns first
        keys = ["run_id", "settlement_outcome", "total", "currency", "status", "item_count"]
        headers = ["run", "outcome", "total", "currency", "status", "items"]
        lines.append(markdown_table(headers, [[summary.get(k) for k in keys]]))
    else:
        lines += _retry_markdown(summary, rows)
    lines += report_lines(summary.get("report_files"), payops)
    return "\n".join(lines)


def _retry_markdown(summary: dict[str, Any], rows: list[list[Any]]) -> list[str]:
    lines: list[str] = []
    counts = {
        k: summary.get(k, 0) for k in ("runs_seen", "failed_runs", "retried", "retried_before", "skipped")
    }
    lines.append(markdown_table(list(counts), [list(counts.values())]))
    if summary.get("retry_outcomes"):
        lines += [
            "",
            "## Retry outcomes",
            "",
            markdown_table(["outcome", "runs"], summary["retry_outcomes"].items()),
        ]
    attention = [r for r in rows if r[8] not in {"not_eligible", "settle_now"}]
    if attention:
        idx = [0, 4, 6, 8, 9, 10, 13]
        lines += [
            "",
            "## Failed runs and retries",
            "",
            markdown_table([REPORT_HEADERS[i] for i in idx], [[r[i] for i in idx] for r in attention[:200]]),
        ]
    return lines


def _alert_markdown(alert: RetryResult, not_attempted: int) -> str:
    return "\n".join(
        [
            "# Settlement retry blocked by the settlement policy",
            "",
            f"The service refused the retry of run `{alert.run.id}` ({alert.run.reference}) with "
            f"**422 `{alert.code}`**: the settlement setup cannot be paid out as it stands.",
            "",
            f"**Fix:** {POLICY_FIX} (check its destinations and providers; `PUT /v1/settlement-policy`), "
            "then run `retry-failed-settlements` again. Nothing was retried after this answer"
            + (f"; {counted(not_attempted, 'other failed run')} not attempted." if not_attempted else "."),
        ]
    )


async def _publish(
    prefix: str, title: str, summary: dict[str, Any], rows: list[list[Any]], payops: PayopsSettings
) -> None:
    await acreate_markdown_artifact(
        key=f"{prefix}-summary", markdown=summary_markdown(title, summary, rows, payops), description=title
    )
    await acreate_table_artifact(
        key=f"{prefix}-runs",
        table=table_rows(rows[:500]),
        description=f"{title}: runs, outcomes and retries (first 500; every column in the xlsx/csv report)",
    )


def _label(kind: str, started: datetime) -> str:
    return f"{kind}-{started.strftime('%Y%m%dT%H%M%SZ')}"


@flow(name="retry-failed-settlements", log_prints=False)
async def retry_failed_settlements(
    params: SettlementRetryParams = SettlementRetryParams(),
) -> State:
    """Retry each failed settlement run of the window exactly once, poll the retries, report.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `SettlementRunSummary`."""
    payops = PayopsSettings.from_env()
    async with open_clients(payops):
        summary, message = await _retry_failed_settlements(params, payops)
    return end_run(summary, message)


async def _retry_failed_settlements(
    params: SettlementRetryParams, payops: PayopsSettings
) -> tuple[SettlementRunSummary, str | None]:
    """Retry the window's failed runs, report them, tell what needs a person; the summary and, for a policy
    alert, the run's failure message."""
    meter = RunMeter()
    started = datetime.now(UTC)
    since = params.since or started - timedelta(days=params.since_days)
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    label = _label("settlement-retry", started)
    settings = load_settings(params.credentials_block, payops)
    scan, results, deadline_reached = await _retry_window(settings, params, since, meter)
    summary = _retry_summary(label, since, params, scan, results, deadline_reached)
    rows = report_rows(scan.runs, {r.run.id: r for r in results})
    meter.into(summary)
    summary.report_files = await asyncio.to_thread(
        write_table_reports,
        params.report_dir or payops.reports,
        label,
        REPORT_HEADERS,
        rows,
        summary.as_json(),
        sheet_title="runs",
        highlight=[needs_a_look(r) for r in rows],
    )
    await _publish("settlement-retry", f"Settlement retry {label}", summary.as_json(), rows, payops)
    await emit_settlement_alerts(label, results, summary.report_files)
    return summary, await _tell_retries(label, summary, results)


async def _retry_window(
    settings: PaymentsSettings, params: SettlementRetryParams, since: datetime, meter: RunMeter
) -> tuple[Scan, list[RetryResult], bool]:
    """Scan the window's runs, retry each failed one not retried before, poll the retries: the scan, every
    run's result (its retry as last polled) and whether the poll deadline was reached."""
    scan = await scan_settlements_task(
        settings, since, params.rate_limit_per_s, params.run_id or None, params.run_reference or None
    )
    meter.api_calls.update(scan.api_calls)
    meter.phase("scan")
    results: list[RetryResult] = list(scan.retried_before)
    if scan.candidates:
        fresh, calls = await resettle_task(settings, scan.candidates, params.rate_limit_per_s)
        results += fresh
        meter.api_calls.update(calls)
    meter.phase("resettle")
    running = {r.retry.id: r.retry for r in results if r.retry is not None and not r.retry.completed}
    deadline_reached = False
    if running:
        poll = await poll_settlements_task(settings, running, params.poll_deadline_s, params.rate_limit_per_s)
        meter.api_calls.update(poll.api_calls)
        deadline_reached = poll.deadline_reached
        for r in results:
            if r.retry is not None and r.retry.id in poll.runs:
                r.retry = poll.runs[r.retry.id]
    meter.phase("poll")
    if (params.run_id or params.run_reference) and not scan.runs:
        asked = params.run_id or params.run_reference
        get_run_logger().warning("no settlement run %s found since %s", asked, since)
    return scan, results, deadline_reached


def _retry_summary(
    label: str,
    since: datetime,
    params: SettlementRetryParams,
    scan: Scan,
    results: list[RetryResult],
    deadline_reached: bool,
) -> SettlementRunSummary:
    """The retry run's summary: what it saw, did and left, by run."""
    actions = Counter(r.action for r in results)
    retries = [r.retry for r in results if r.retry is not None]
    alert = next((r for r in results if r.action == "alert"), None)
    not_completed = sorted(r.id for r in retries if not r.completed)
    outcome = Outcome.INCOMPLETE if not_completed else Outcome.COMPLETED
    summary = SettlementRunSummary(
        label=label,
        outcome=Outcome.POLICY_ALERT if alert else outcome,
        window_since=since.isoformat(),
        run_id=params.run_id,
        run_reference=params.run_reference,
        runs_seen=len(scan.runs),
        failed_runs=len(scan.candidates) + len(scan.retried_before),
        retried=actions["retried"],
        retried_before=actions["retried_before"],
        skipped=actions["skipped"],
        not_attempted=actions["not_attempted"],
        alert=SettlementAlert(code=alert.code, run_id=alert.run.id, fix=POLICY_FIX) if alert else None,
        retry_outcomes=dict(sorted(Counter(r.outcome or r.status for r in retries).items())),
        retries_failed_again=sorted(r.id for r in retries if r.failed),
        retries_not_completed=not_completed,
        deadline_reached=deadline_reached,
        skipped_reasons={r.run.id: r.reason for r in results if r.action == "skipped"},
        retries={r.run.id: r.retry.id for r in results if r.retry is not None},
    )
    if (params.run_id or params.run_reference) and not scan.runs:
        summary.note(f"run {params.run_id or params.run_reference} not found")
    return summary


async def _tell_retries(label: str, summary: SettlementRunSummary, results: list[RetryResult]) -> str | None:
    """Log what needs a person (skipped runs, retries failed again); a policy alert also gets its artifact
    and is the run's failure message (returned; None otherwise)."""
    logger = get_run_logger()
    for r in results:
        if r.action == "skipped":
            logger.warning("settlement run %s not retried: %s", r.run.id, r.reason)
        elif r.retry is not None and r.retry.failed:
            logger.warning(
                "retry %s of settlement run %s failed again (%s); not retried again",
                r.retry.id,
                r.run.id,
                r.retry.outcome,
            )
    alert = next((r for r in results if r.action == "alert"), None)
    if alert is not None:
        not_attempted = summary.not_attempted
        message = (
            f"settlement policy cannot be paid out ({alert.code}): {POLICY_FIX}, then run the retry again; "
            f"{counted(not_attempted, 'other failed run')} not attempted"
        )
        logger.error(message)
        await acreate_markdown_artifact(
            key="settlement-policy-alert",
            markdown=_alert_markdown(alert, not_attempted),
            description="Settlement policy alert",
        )
        return message
    logger.info(
        "settlement retry %s: %d run(s) seen, %d failed, %d retried now, %d retried before, %d skipped",
        label,
        summary.runs_seen,
        summary.failed_runs,
        summary.retried,
        summary.retried_before,
        summary.skipped,
    )
    return None


@flow(name="settle-now", log_prints=False)
async def settle_now(params: SettleNowParams = SettleNowParams()) -> State:
    """Start an on-demand settlement run, poll it to completed, report.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `SettlementRunSummary`."""
    payops = PayopsSettings.from_env()
    async with open_clients(payops):
        summary, message = await _settle_now(params, payops)
    return end_run(summary, message)


async def _settle_now(
    params: SettleNowParams, payops: PayopsSettings
) -> tuple[SettlementRunSummary, str | None]:
    from prefect.runtime import flow_run

    logger = get_run_logger()
    meter = RunMeter()
    started = datetime.now(UTC)
    reference = params.reference or settle_now_reference(str(flow_run.id or started.timestamp()))
    label = f"settle-now-{reference}"
    settings = load_settings(params.credentials_block, payops)

    outcome = await settle_now_task(settings, reference, params.currency or None, params.rate_limit_per_s)
    meter.api_calls.update(outcome.api_calls)
    summary = SettlementRunSummary(label=label, reference=reference, outcome=Outcome.COMPLETED)
    if outcome.run is None:
        message = f"settlement policy cannot be paid out ({outcome.code}): {POLICY_FIX}, then settle again"
        logger.error(message)
        summary.outcome = Outcome.POLICY_ALERT
        summary.alert = SettlementAlert(code=outcome.code, fix=POLICY_FIX)
        meter.into(summary)
        await acreate_markdown_artifact(
            key="settlement-policy-alert",
            description="Settlement policy alert",
            markdown=f"# Settle now blocked by the settlement policy\n\n"
            f"422 `{outcome.code}`: {outcome.reason}\n\n"
            f"**Fix:** {POLICY_FIX}, then settle again.",
        )
        return summary, message
    run = outcome.run
    deadline_reached = False
    if not run.completed:
        poll = await poll_settlements_task(
            settings, {run.id: run}, params.poll_deadline_s, params.rate_limit_per_s
        )
        meter.api_calls.update(poll.api_calls)
        run, deadline_reached = poll.runs[run.id], poll.deadline_reached
    summary.outcome = Outcome.COMPLETED if run.completed else Outcome.INCOMPLETE
    summary.run_id = run.id
    summary.status = run.status
    summary.settlement_outcome = run.outcome
    summary.item_count = run.item_count
    summary.total = money(run.total)
    summary.currency = run.currency
    summary.deadline_reached = deadline_reached
    meter.into(summary)
    action = "settle_now"
    reason = f"outcome {run.outcome}" if run.completed else f"still {run.status} at the poll deadline"
    rows = [[*_run_cells(run), action, reason, *([None] * 6)]]
    folder = params.report_dir or payops.reports
    summary.report_files = await asyncio.to_thread(
        write_table_reports, folder, label, REPORT_HEADERS, rows, summary.as_json(), sheet_title="runs"
    )
    settled = {**summary.as_json(), "runs_seen": 1}
    await _publish("settle-now", f"Settle now {reference}", settled, rows, payops)
    if run.failed:
        logger.warning(
            "settlement run %s completed %s: retry it with `payops settlements retry --run-id %s`",
            run.id,
            run.outcome,
            run.id,
        )
    logger.info(
        "settlement run %s: %s %s, total %s %s, %s item(s); reports %s",
        run.id,
        run.status,
        run.outcome or "",
        summary.total,
        run.currency,
        run.item_count,
        ", ".join(f"{k} {v}" for k, v in summary.report_files.items()),
    )
    return summary, None
