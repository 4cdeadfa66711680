"""Settlement runs: select failed runs, retry each exactly once, poll to completed, relay events to Prefect.

Plain async functions take a `PaymentsClient`; the thin `@task` wrappers open the client from settings.

Exactly once: the retry of run R always uses the reference `resettlement_reference(R)` (``payops-rs-`` + the
run id, within the reference pattern) and the Idempotency-Key ``payops-resettle:{R}``. A re-run, a Prefect
retry or a client retry after a fault therefore replays the first answer or gets 409
``settlement_already_retried``; neither starts a second retry. A run whose reference carries the
``payops-rs-`` prefix is one of our retries: reported, never retried again.

Event-driven retry
------------------
`emit_settlement_event(envelope)` turns a ``settlement.status_changed`` envelope (webhook receiver or the
``GET /v1/events`` feed, see `relay_settlement_events`) into the Prefect event
``payments.settlement.status_changed`` (the shared conversion `tasks.events.payment_events.envelope_to_event`)
with

* resource: ``prefect.resource.id`` = ``payments.settlement.<reference>``, ``prefect.resource.name`` =
  ``<reference>``, and labels ``payments.reference``, ``payments.webhook-id``, ``payments.status`` and
  ``payments.outcome`` (left out while running) -- the same labels for the webhook receiver, this relay and
  the events catch-up, so one trigger serves every path;
* payload: the envelope's ``data`` (the run as it stood; no ``id``), plus ``eventId`` and ``eventType``;
* event id: uuid5 of the envelope id (the receiver's namespace): a duplicate delivery is one Prefect event.

Trigger of the ``retry-failed-settlements`` deployment (prefect.yaml)::

    triggers:
      - type: event
        enabled: true
        match:
          prefect.resource.id: "payments.settlement.*"
          payments.outcome: ["failed_partial", "failed_all"]
        expect: ["payments.settlement.status_changed"]
        posture: Reactive
        threshold: 1
        within: 0
        parameters:
          params:
            run_reference: "{{ event.payload.reference | string }}"

The flow then retries only that run; a failed run that is itself our retry is reported, not retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from payops.connectors.payments import (
    ConflictError,
    PaymentsClient,
    PaymentsSettings,
    UnprocessableEntityError,
    WebhookEnvelope,
)
from payops.connectors.payments.models import SettlementRun
from payops.tasks.events.payment_events import as_envelope, default_emitter, envelope_to_event
from payops.tasks.payouts.poll_loop import SETTLEMENT_BACKOFF, Backoff, PollRounds, poll_until
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.retries import API_TASK_RETRY
from payops.tasks.wire.references import (
    is_our_retry,
    resettlement_idempotency_key,
    resettlement_reference,
    settle_now_idempotency_key,
)
from prefect import task
from prefect.cache_policies import NO_CACHE

log = logging.getLogger(__name__)

RETRYABLE_OUTCOMES = frozenset({"failed_partial", "failed_all"})
POLICY_CODES = frozenset({"policy_missing_provider", "policy_not_nettable"})
POLICY_FIX = "save the settlement policy again"
EVENT_TYPE = "settlement.status_changed"
PREFECT_EVENT = "payments.settlement.status_changed"
RESOURCE_PREFIX = "payments.settlement."
PAGE_SIZE = 50


# --------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------


@dataclass
class RunInfo:
    """A picklable snapshot of a settlement run (money as Decimal)."""

    id: str
    reference: str
    status: str
    outcome: str | None
    item_count: int
    total: Decimal
    currency: str
    started_at: datetime
    completed_at: datetime | None = None

    @classmethod
    def of(cls, run: SettlementRun) -> RunInfo:
        return cls(
            run.id,
            run.reference,
            run.status,
            run.outcome,
            run.item_count,
            Decimal(run.total),
            run.currency,
            run.started_at,
            run.completed_at,
        )

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def failed(self) -> bool:
        return self.completed and self.outcome in RETRYABLE_OUTCOMES


@dataclass
class RetryResult:
    """What happened to one failed run (and its retry run, when there is one)."""

    run: RunInfo
    action: str  # retried, retried_before, skipped, alert, not_attempted
    reason: str | None = None
    code: str | None = None
    retry: RunInfo | None = None

    @property
    def reference(self) -> str:
        return resettlement_reference(self.run.id)


@dataclass
class Scan:
    """The runs of the window and what the selection decided about each."""

    runs: list[RunInfo]
    candidates: list[RunInfo]
    retried_before: list[RetryResult]
    api_calls: Counter[str] = field(default_factory=Counter)


@dataclass
class SettleNowResult:
    """The run started on demand, or the policy code that refused it (`run` is None then)."""

    run: RunInfo | None
    code: str | None = None
    reason: str | None = None
    api_calls: Counter[str] = field(default_factory=Counter)


@dataclass
class PollResult(PollRounds):
    runs: dict[str, RunInfo]


# --------------------------------------------------------------------------------------------------
# Listing and selection
# --------------------------------------------------------------------------------------------------


async def list_runs_since(
    client: PaymentsClient, since: datetime, *, page_size: int = PAGE_SIZE
) -> list[RunInfo]:
    """Runs started at or after `since`; runs come newest first, so paging stops at the first older one."""
    runs: list[RunInfo] = []
    cursor: str | None = None
    while True:
        page = await client.settlements.list(limit=page_size, cursor=cursor)
        for item in page.items:
            if item.started_at < since:
                return runs
            runs.append(RunInfo.of(item))
        if not page.next_cursor or page.next_cursor == cursor:
            return runs
        cursor = page.next_cursor


async def find_run_by_reference(
    client: PaymentsClient, reference: str, not_before: datetime, *, page_size: int = PAGE_SIZE
) -> RunInfo | None:
    """The run with `reference`, looking back to `not_before` (a retry is never older than its original)."""
    for run in await list_runs_since(client, not_before, page_size=page_size):
        if run.reference == reference:
            return run
    return None


def select_runs(runs: list[RunInfo]) -> tuple[list[RunInfo], list[RetryResult]]:
    """Split the window: failed runs to retry now, and failed runs whose retry (by our reference) is listed.

    Settled and running runs are never candidates; nor are our own retries, even when they failed again.
    """
    by_reference = {r.reference: r for r in runs}
    candidates: list[RunInfo] = []
    done: list[RetryResult] = []
    for run in runs:
        if not run.failed or is_our_retry(run.reference):
            continue
        retry = by_reference.get(resettlement_reference(run.id))
        if retry is not None:
            done.append(
                RetryResult(
                    run, "retried_before", reason="retried by an earlier run of this flow", retry=retry
                )
            )
        else:
            candidates.append(run)
    return candidates, done


def run_row_action(
    run: RunInfo, results: Mapping[str, RetryResult], retry_of: Mapping[str, str]
) -> tuple[str, str]:
    """Action and reason of a listed run that is not a failed original (for the report)."""
    if run.id in results:
        r = results[run.id]
        return r.action, r.reason or ""
    if is_our_retry(run.reference):
        original = retry_of.get(run.reference)
        of = f" of run {original}" if original else ""
        if run.failed:
            return "own_retry", f"our retry{of} failed again ({run.outcome}); reported, not retried again"
        return "own_retry", f"our retry{of}"
    if not run.completed:
        return "not_eligible", f"status {run.status}"
    return "not_eligible", f"outcome {run.outcome}"


# --------------------------------------------------------------------------------------------------
# Retrying one run
# --------------------------------------------------------------------------------------------------


async def resettle(client: PaymentsClient, run: RunInfo) -> RetryResult:
    """Start the one retry of `run`; 409/422 answers become results, not exceptions.

    409 settlement_already_retried → ``retried_before`` (the retry run is looked up by our reference);
    409 resettlement_not_allowed (or another 409) → ``skipped`` with its reason;
    422 policy_missing_provider / policy_not_nettable → ``alert`` (the caller stops: every retry would fail);
    another 422 → ``skipped``.
    """
    reference = resettlement_reference(run.id)
    try:
        new = await client.settlements.resettle(
            run.id, reference=reference, idempotency_key=resettlement_idempotency_key(run.id)
        )
    except ConflictError as exc:
        if exc.code == "settlement_already_retried":
            found = await find_run_by_reference(client, reference, run.started_at)
            reason = "retried before" if found else f"retried before, not by this flow (no run {reference})"
            return RetryResult(run, "retried_before", reason=reason, code=exc.code, retry=found)
        log.warning("retry of settlement run %s refused: %s", run.id, exc.code)
        return RetryResult(run, "skipped", reason=f"{exc.code}: {exc.message}", code=exc.code)
    except UnprocessableEntityError as exc:
        if exc.code in POLICY_CODES:
            return RetryResult(run, "alert", reason=f"{exc.code}: {exc.message}; {POLICY_FIX}", code=exc.code)
        return RetryResult(run, "skipped", reason=f"{exc.code}: {exc.message}", code=exc.code)
    return RetryResult(run, "retried", retry=RunInfo.of(new))


async def resettle_all(client: PaymentsClient, runs: list[RunInfo]) -> list[RetryResult]:
    """Retry each run in turn; after a policy alert the rest are not attempted (nothing loops)."""
    results: list[RetryResult] = []
    alert: RetryResult | None = None
    for run in runs:
        if alert is not None:
            results.append(
                RetryResult(run, "not_attempted", reason=f"not attempted after {alert.code}", code=alert.code)
            )
            continue
        result = await resettle(client, run)
        if result.action == "alert":
            alert = result
        results.append(result)
    return results


# --------------------------------------------------------------------------------------------------
# Polling
# --------------------------------------------------------------------------------------------------


async def poll_until_completed(
    client: PaymentsClient,
    runs: Mapping[str, RunInfo],
    *,
    deadline_s: float,
    backoff: Backoff = SETTLEMENT_BACKOFF,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> PollResult:
    """Read each running run by id until all are completed or `deadline_s` passes; the interval grows."""
    result = PollResult(dict(runs))

    def pending() -> list[str]:
        return [i for i, r in result.runs.items() if not r.completed]

    async def refresh() -> None:
        for run_id in pending():
            result.runs[run_id] = RunInfo.of(await client.settlements.get(run_id))

    progress = await poll_until(refresh, lambda: not pending(), deadline_s, backoff, sleep=sleep)
    result.rounds, result.deadline_reached = progress.rounds, progress.deadline_reached
    return result


# --------------------------------------------------------------------------------------------------
# Settle now
# --------------------------------------------------------------------------------------------------


async def start_settlement(client: PaymentsClient, reference: str, currency: str | None = None) -> RunInfo:
    """POST /v1/settlements with a key derived from `reference` (a replay returns the first run)."""
    fields: dict[str, Any] = {"reference": reference}
    if currency:
        fields["currency"] = currency
    run = await client.settlements.settle_now(idempotency_key=settle_now_idempotency_key(reference), **fields)
    return RunInfo.of(run)


# --------------------------------------------------------------------------------------------------
# Prefect events
# --------------------------------------------------------------------------------------------------


def settlement_event(envelope: WebhookEnvelope | Mapping[str, Any]) -> dict[str, Any] | None:
    """Arguments of `prefect.events.emit_event` for a ``settlement.status_changed`` envelope, else None.

    The conversion itself is `tasks.events.payment_events.envelope_to_event`, shared with the webhook receiver
    and the events catch-up.
    """
    env = as_envelope(envelope)
    reference = env.data.get("reference")
    if env.type != EVENT_TYPE or not isinstance(reference, str) or not reference:
        return None
    return envelope_to_event(env)


def emit_settlement_event(envelope: WebhookEnvelope | Mapping[str, Any]) -> Any:
    """Emit the Prefect event of a settlement envelope; other envelopes are ignored (returns None)."""
    kwargs = settlement_event(envelope)
    if kwargs is None:
        return None
    return default_emitter(**kwargs)


async def relay_settlement_events(client: PaymentsClient, after: str | None = None) -> tuple[int, str | None]:
    """Emit a Prefect event for every settlement event of the feed after `after`.

    Returns (events emitted, id of the last event read), to resume from next time.
    """
    emitted, last = 0, after
    async for envelope in client.events.iterate(after=after):
        last = envelope.id
        if emit_settlement_event(envelope) is not None:
            emitted += 1
    return emitted, last


# --------------------------------------------------------------------------------------------------
# Prefect tasks (thin)
# --------------------------------------------------------------------------------------------------


@task(
    cache_policy=NO_CACHE,
    name="scan-settlements",
    **API_TASK_RETRY,
)
async def scan_settlements_task(
    settings: PaymentsSettings,
    since: datetime,
    rate_per_s: float,
    run_id: str | None = None,
    run_reference: str | None = None,
) -> Scan:
    """List the window (or find the one run asked for) and select the runs to retry."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        if run_id:
            target = RunInfo.of(await client.settlements.get(run_id))
            runs = [target] + [
                r for r in await list_runs_since(client, target.started_at) if r.id != target.id
            ]
            runs = [r for r in runs if r.id == target.id or r.reference == resettlement_reference(target.id)]
        else:
            runs = await list_runs_since(client, since)
            if run_reference:
                wanted = {r.id for r in runs if r.reference == run_reference}
                runs = [
                    r
                    for r in runs
                    if r.id in wanted or any(r.reference == resettlement_reference(w) for w in wanted)
                ]
        candidates, done = select_runs(runs)
        return Scan(runs, candidates, done, Counter(client.api_calls))


@task(
    cache_policy=NO_CACHE,
    name="resettle-runs",
    **API_TASK_RETRY,
)
async def resettle_task(
    settings: PaymentsSettings, runs: list[RunInfo], rate_per_s: float
) -> tuple[list[RetryResult], Counter[str]]:
    """Retry the selected runs (one request each, stable keys: a task retry replays)."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        return await resettle_all(client, runs), Counter(client.api_calls)


@task(
    cache_policy=NO_CACHE,
    name="poll-settlements",
    **API_TASK_RETRY,
)
async def poll_settlements_task(
    settings: PaymentsSettings, runs: dict[str, RunInfo], deadline_s: float, rate_per_s: float
) -> PollResult:
    """Poll new runs to completed (bounded deadline, growing interval)."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        result = await poll_until_completed(client, runs, deadline_s=deadline_s)
        result.api_calls = Counter(client.api_calls)
        return result


@task(
    cache_policy=NO_CACHE,
    name="settle-now",
    **API_TASK_RETRY,
)
async def settle_now_task(
    settings: PaymentsSettings, reference: str, currency: str | None, rate_per_s: float
) -> SettleNowResult:
    """Start an on-demand settlement run (a task retry replays the same key and body).

    A 422 policy answer is returned (`run` None) for the flow to alert on; other errors raise.
    """
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        try:
            run = await start_settlement(client, reference, currency)
        except UnprocessableEntityError as exc:
            if exc.code not in POLICY_CODES:
                raise
            return SettleNowResult(None, exc.code, exc.message, Counter(client.api_calls))
        return SettleNowResult(run, api_calls=Counter(client.api_calls))
