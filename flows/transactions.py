"""Flow `transactions-report`: a window of the unified transaction list as xlsx/csv/JSON with Decimal sums.

Default window: the previous Africa/Accra day. Summary by kind, direction, status and reconciliation status,
amount sums per kind and direction, wallet balances and limit usage at the time; mismatched reconciliations
are highlighted and listed.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Literal

from payops.flows.flow_decorator import flow
from payops.flows.outcomes import end_run
from payops.flows.run_params import DEFAULT_RATE_PER_S, FORM_CONFIG, CredentialsBlock, RateLimit, ReportDir
from payops.flows.summaries import LimitLine, TransactionsReportSummary, WalletLine
from payops.store.settings import PayopsSettings
from payops.tasks.ledger.transactions_report import (
    HEADERS,
    RECONCILIATION_COLUMN,
    Filters,
    breakdown,
    fetch_report_data_task,
    kind_direction_totals,
    limit_rows,
    previous_day,
    transaction_rows,
    wallet_rows,
    write_transactions_report,
)
from payops.tasks.reports.artifacts import markdown_table, report_lines
from payops.tasks.runtime.clients import open_clients
from payops.tasks.runtime.credentials import load_settings
from payops.tasks.runtime.run_meter import RunMeter
from payops.tasks.runtime.run_outcomes import Outcome
from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact
from prefect.states import State
from pydantic import BaseModel, ConfigDict, Field, model_validator

Kind = Literal["collection", "payout", "settlement", "utility", "wallet_transfer"]
WALLET_FIELDS = list(WalletLine.model_fields)
"""The summary's names of `wallet_rows`' columns."""
LIMIT_FIELDS = list(LimitLine.model_fields)
"""The summary's names of `limit_rows`' columns."""


class TransactionsReportParams(BaseModel):
    """Parameters of `transactions-report`."""

    from_: datetime | None = Field(
        None,
        alias="from",
        description="First moment included. Leave empty for the start of the previous day (Accra time).",
    )
    to: datetime | None = Field(
        None,
        description="First moment no longer included. Leave empty for the end of the previous day (Accra).",
    )
    kind: Kind | None = Field(None, description="Only this kind of transaction. Leave empty for every kind.")
    status: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Only transactions with this status. Leave empty for all.",
    )
    settlement_status: Literal["not_eligible", "eligible", "claimed", "settled"] | None = Field(
        None, description="Only transactions with this settlement status. Leave empty for all."
    )
    reconciliation_status: Literal["unchecked", "matched", "mismatched"] | None = Field(
        None, description="Only transactions with this reconciliation status. Leave empty for all."
    )
    page_size: int = Field(100, ge=1, le=100, description="Transactions read per request to the service.")
    report_dir: ReportDir = ""
    credentials_block: CredentialsBlock = ""
    rate_limit_per_s: RateLimit = DEFAULT_RATE_PER_S

    model_config = ConfigDict(FORM_CONFIG, populate_by_name=True)

    @model_validator(mode="after")
    def _window(self) -> TransactionsReportParams:
        for name in ("from_", "to"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                setattr(self, name, value.replace(tzinfo=UTC))
        if self.from_ and self.to and self.from_ >= self.to:
            raise ValueError("'from' must be before 'to'")
        return self


def _markdown(summary: dict[str, Any], payops: PayopsSettings) -> str:
    """The report's artifact, from the summary's JSON."""
    lines = [f"# Transactions {summary['from']} → {summary['to']}", "", f"**Outcome:** {summary['outcome']}"]
    lines += ["", f"{summary['transactions']} transaction(s); filters: {summary['filters'] or 'none'}", ""]
    totals = [[k, c, v] for k, cur in summary["totals_by_kind_direction"].items() for c, v in cur.items()]
    if totals:
        lines.append(markdown_table(["kind/direction", "currency", "amount"], totals))
    recon = [[k, e["count"]] for k, e in summary["by_reconciliation"].items()]
    if recon:
        lines += ["", markdown_table(["reconciliation", "transactions"], recon)]
    lines += report_lines(summary.get("report_files"), payops)
    return "\n".join(lines)


@flow(name="transactions-report", log_prints=False)
async def transactions_report(
    params: TransactionsReportParams = TransactionsReportParams(),
) -> State:
    """Read every page of the window, sum, write the report and artifacts.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `TransactionsReportSummary`."""
    payops = PayopsSettings.from_env()
    async with open_clients(payops):
        summary = await _transactions_report(params, payops)
    return end_run(summary)


async def _transactions_report(
    params: TransactionsReportParams, payops: PayopsSettings
) -> TransactionsReportSummary:
    logger = get_run_logger()
    meter = RunMeter()
    default_start, default_end = previous_day(datetime.now(UTC))
    start, end = params.from_ or default_start, params.to or default_end
    filters = Filters(params.kind, params.status, params.settlement_status, params.reconciliation_status)
    settings = load_settings(params.credentials_block, payops)
    data = await fetch_report_data_task(
        settings, start, end, filters, params.page_size, params.rate_limit_per_s
    )
    meter.phase("fetch")
    label = f"transactions-{start.strftime('%Y%m%dT%H%M%S%z')}-{end.strftime('%Y%m%dT%H%M%S%z')}"
    txs = data.transactions
    summary = TransactionsReportSummary(
        label=label,
        outcome=Outcome.COMPLETED,
        from_=start.isoformat(),
        to=end.isoformat(),
        filters={k: v for k, v in vars(filters).items() if v},
        transactions=len(txs),
        totals_by_kind_direction=kind_direction_totals(txs),
        by_kind=breakdown(txs, "kind"),
        by_direction=breakdown(txs, "direction"),
        by_status=breakdown(txs, "status"),
        by_reconciliation=breakdown(txs, "reconciliation"),
        mismatched=[r[3] for r in transaction_rows(txs) if r[RECONCILIATION_COLUMN] == "mismatched"],
        wallet=[WalletLine(**dict(zip(WALLET_FIELDS, r, strict=True))) for r in wallet_rows(data.wallet)],
        limits=[LimitLine(**dict(zip(LIMIT_FIELDS, r, strict=True))) for r in limit_rows(data.limits)],
        taken_at=data.taken_at.isoformat(),
        api_calls=dict(sorted(data.api_calls.items())),
    )
    summary.report_files = await asyncio.to_thread(
        write_transactions_report, params.report_dir or payops.reports, label, data, summary.as_json()
    )
    meter.phase("report")
    summary.phase_durations_s, summary.duration_s = meter.phases, meter.elapsed
    await acreate_markdown_artifact(
        key="transactions-report", markdown=_markdown(summary.as_json(), payops), description=label
    )
    if summary.mismatched:
        rows = [r for r in transaction_rows(data.transactions) if r[RECONCILIATION_COLUMN] == "mismatched"]
        await acreate_table_artifact(
            key="transactions-mismatched",
            table=[dict(zip(HEADERS, r, strict=True)) for r in rows[:500]],
            description="Transactions whose reconciliation is mismatched (first 500)",
        )
        logger.warning("%d transaction(s) with a mismatched reconciliation", len(summary.mismatched))
    logger.info("transactions report %s: %d transactions", label, len(data.transactions))
    return summary
