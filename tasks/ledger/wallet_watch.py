"""Wallet watch: can the wallet (and the limits) cover the payout runs coming up?

Per currency: the available balance and outbound limit headroom (`tasks.payouts.preflight.read_headroom`)
against a threshold and against the totals of the payout runs that are scheduled within the horizon or paused
waiting for approval (their sheets read with the intake, one task for all of them). `assess` is the pure rule.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from payops.connectors.payments import PaymentsSettings
from payops.tasks.intake import IntakeError, IntakeOptions, read_payout_sheet
from payops.tasks.payouts.preflight import CurrencyCheck, read_headroom
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.retries import API_TASK_RETRY
from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel

ZERO = Decimal("0")
PAYOUT_FLOW = "payout-spreadsheet"


class CurrencyWatch(BaseModel):
    """One currency's verdict."""

    currency: str
    available: Decimal | None
    upcoming: Decimal
    after_upcoming: Decimal | None
    threshold: Decimal
    daily_remaining: Decimal | None = None
    monthly_remaining: Decimal | None = None
    low: bool = False
    reasons: list[str] = []


def assess(
    rooms: Mapping[str, CurrencyCheck],
    upcoming: Mapping[str, Decimal],
    threshold: Decimal,
    thresholds: Mapping[str, Decimal] | None = None,
) -> list[CurrencyWatch]:
    """Low when the balance left after the upcoming runs is below the currency's threshold, or the upcoming
    total exceeds the remaining daily or monthly outbound headroom."""
    thresholds = thresholds or {}
    out = []
    for cur in sorted({*rooms, *upcoming, *thresholds}):
        room = rooms.get(cur) or CurrencyCheck(cur)
        need = upcoming.get(cur, ZERO)
        limit = thresholds.get(cur, threshold)
        after = None if room.available is None else room.available - need
        watch = CurrencyWatch(
            currency=cur,
            available=room.available,
            upcoming=need,
            after_upcoming=after,
            threshold=limit,
            daily_remaining=room.daily_remaining,
            monthly_remaining=room.monthly_remaining,
        )
        if after is None:
            if need > 0 or cur in thresholds:
                watch.reasons.append(f"{cur}: no balance in the wallet")
        elif after < limit:
            watch.reasons.append(
                f"{cur}: available {room.available} minus upcoming payouts {need} leaves {after}, "
                f"below the threshold {limit}"
            )
        for period, remaining in (("daily", room.daily_remaining), ("monthly", room.monthly_remaining)):
            if remaining is not None and need > remaining:
                watch.reasons.append(
                    f"{cur}: upcoming payouts {need} exceed the {period} headroom {remaining}"
                )
        watch.low = bool(watch.reasons)
        out.append(watch)
    return out


@dataclass
class UpcomingRuns:
    """The payout runs ahead and their sheet totals per currency."""

    totals: dict[str, Decimal] = field(default_factory=dict)
    runs: int = 0
    by_state: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


@dataclass
class UpcomingRun:
    """A payout run ahead: its state, name, sheet and country code (from the run's parameters)."""

    state: str
    name: str
    source: str | None
    country_code: str = "233"


async def upcoming_payout_runs(horizon: timedelta, now: datetime | None = None) -> list[UpcomingRun]:
    """Payout flow runs scheduled to start within ``horizon``, and those paused waiting for approval."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    now = now or datetime.now(UTC)
    async with get_client() as client:
        runs = await client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=[PAYOUT_FLOW])),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(
                    type=FlowRunFilterStateType(any_=[StateType.SCHEDULED, StateType.PAUSED])
                )
            ),
        )
    ahead = []
    for run in runs:
        paused = bool(run.state and run.state.is_paused())
        start = run.next_scheduled_start_time or run.expected_start_time
        if not paused and (start is None or start > now + horizon):
            continue
        params = (run.parameters or {}).get("params") or {}
        source = params.get("source") if isinstance(params, dict) else None
        code = str(params.get("default_country_code") or "233") if isinstance(params, dict) else "233"
        ahead.append(UpcomingRun("paused" if paused else "scheduled", run.name, source, code))
    return ahead


def sheet_totals(runs: Iterable[UpcomingRun]) -> UpcomingRuns:
    """Sum the valid rows of each run's sheet per currency (a sheet that cannot be read is a note)."""
    out = UpcomingRuns()
    totals: dict[str, Decimal] = defaultdict(lambda: ZERO)
    for run in runs:
        out.runs += 1
        out.by_state[run.state] += 1
        if not run.source:
            out.notes.append(f"run {run.name}: no sheet in its parameters; not counted")
            continue
        try:
            intake = read_payout_sheet(run.source, IntakeOptions(default_country_code=run.country_code))
        except (IntakeError, OSError, ValueError) as exc:
            out.notes.append(f"run {run.name}: sheet not readable ({type(exc).__name__}); not counted")
            continue
        for row in intake.rows:
            totals[row.currency] += row.amount
    out.totals = dict(totals)
    return out


@task(cache_policy=NO_CACHE, name="read-headroom", **API_TASK_RETRY)
async def read_headroom_task(settings: PaymentsSettings, rate_per_s: float) -> dict[str, CurrencyCheck]:
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _transport):
        return await read_headroom(client)


@task(cache_policy=NO_CACHE, name="upcoming-payout-totals")
async def upcoming_totals_task(horizon_hours: float) -> UpcomingRuns:
    """One task for every upcoming run: find them, read their sheets (each in the intake's child process)."""
    runs = await upcoming_payout_runs(timedelta(hours=horizon_hours))
    return await asyncio.to_thread(sheet_totals, runs)
