"""Flow `wallet-watch`: warn once when a currency's balance or limits cannot cover the payout runs ahead."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from payops.flows.flow_decorator import flow
from payops.flows.run_params import FORM_CONFIG, CredentialsBlock
from payops.store.settings import PayopsSettings
from payops.tasks.events.alerts import CROSSINGS_VARIABLE, Crossings, emit_low_balance
from payops.tasks.ledger.wallet_watch import CurrencyWatch, assess, read_headroom_task, upcoming_totals_task
from payops.tasks.reports.artifacts import markdown_table
from payops.tasks.runtime.clients import open_clients
from payops.tasks.runtime.credentials import load_settings
from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact
from pydantic import BaseModel, Field


class WalletWatchParams(BaseModel):
    """Parameters of `wallet-watch`."""

    model_config = FORM_CONFIG

    threshold: Decimal = Field(
        Decimal("0"), ge=0, description="Balance to keep after the upcoming payout runs, every currency"
    )
    thresholds: dict[str, Decimal] = Field(
        default_factory=dict, description="Per-currency thresholds (e.g. {'GHS': 5000}); override `threshold`"
    )
    horizon_hours: float = Field(
        24, gt=0, le=24 * 31, description="Count payout runs scheduled to start within this many hours"
    )
    crossings_variable: str = Field(
        CROSSINGS_VARIABLE,
        pattern=r"^[a-z0-9_-]{1,200}$",
        description="Prefect Variable remembering which alerts are on (one alert per crossing)",
    )
    credentials_block: CredentialsBlock = ""
    rate_limit_per_s: float = Field(
        50,
        gt=0,
        description="Most requests per second to the Payments Service (without a Prefect rate limit).",
    )


class WalletWatchSummary(BaseModel):
    """What one watch saw and whom it alerted."""

    outcome: str  # ok, low
    checked_at: datetime
    horizon_hours: float
    upcoming_runs: int
    upcoming_by_state: dict[str, int]
    currencies: list[CurrencyWatch]
    alerts_emitted: list[str]
    notes: list[str]


def _markdown(s: WalletWatchSummary) -> str:
    lines = [
        f"# Wallet watch: {s.outcome}",
        "",
        f"Payout runs ahead ({s.horizon_hours:g} h): {s.upcoming_runs}",
        "",
    ]
    lines.append(
        markdown_table(
            ["currency", "available", "upcoming", "after", "threshold", "daily left", "monthly left", "low"],
            [
                [c.currency, c.available, c.upcoming, c.after_upcoming, c.threshold]
                + [c.daily_remaining, c.monthly_remaining, "yes" if c.low else "no"]
                for c in s.currencies
            ],
        )
    )
    reasons = [r for c in s.currencies for r in c.reasons] + s.notes
    if reasons:
        lines += [""] + [f"- {r}" for r in reasons]
    return "\n".join(lines)


@flow(name="wallet-watch", log_prints=False)
async def wallet_watch(params: WalletWatchParams = WalletWatchParams()) -> WalletWatchSummary:
    """Balance and headroom per currency vs the threshold and the payout runs ahead; alert on crossing."""
    params = params or WalletWatchParams()
    logger = get_run_logger()
    payops = PayopsSettings.from_env()
    settings = load_settings(params.credentials_block, payops)
    async with open_clients(payops):
        rooms = await read_headroom_task(settings, params.rate_limit_per_s)
    upcoming = await upcoming_totals_task(params.horizon_hours)
    watches = assess(rooms, upcoming.totals, params.threshold, params.thresholds)
    crossings = Crossings(params.crossings_variable)
    emitted = []
    for watch in watches:
        if await crossings.turned_on(f"wallet:{watch.currency}", watch.low):
            emit_low_balance(watch, params.horizon_hours, upcoming.runs)
            emitted.append(watch.currency)
    summary = WalletWatchSummary(
        outcome="low" if any(w.low for w in watches) else "ok",
        checked_at=datetime.now(UTC),
        horizon_hours=params.horizon_hours,
        upcoming_runs=upcoming.runs,
        upcoming_by_state=dict(upcoming.by_state),
        currencies=watches,
        alerts_emitted=emitted,
        notes=upcoming.notes,
    )
    await acreate_markdown_artifact(
        key="wallet-watch", markdown=_markdown(summary), description="Wallet watch"
    )
    for watch in watches:
        for reason in watch.reasons:
            logger.warning("%s", reason)
    logger.info("wallet watch: %s; alerts emitted for %s", summary.outcome, emitted or "none")
    return summary
