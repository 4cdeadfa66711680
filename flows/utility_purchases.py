"""Flow `utility-purchases`: a sheet of airtime/data purchases bought exactly once, polled to final, reported.

Sheet → products (``GET /v1/utility-products``) → validation located by row and column (a bad sheet sends
nothing) → fee quotes per distinct product and amount → purchases in chunks (one task per chunk, bounded
concurrency inside) with references and keys fixed by label and row → poll to final → xlsx/csv/JSON report
and artifacts. ``outcome_unknown`` and ``refund_failed`` are waited on and reported, never bought again.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from decimal import Decimal
from typing import Any

from payops.connectors.payments import PaymentsSettings
from payops.connectors.payments.models import UTILITY_PURCHASE_AWAITING_STATUSES
from payops.flows.flow_decorator import flow
from payops.flows.outcomes import end_run
from payops.flows.pipeline import SheetRun, send_parts
from payops.flows.run_params import SheetRunParams, sheet_run_name, tag_run
from payops.flows.summaries import PurchaseRunSummary
from payops.store.settings import PayopsSettings
from payops.tasks.intake import write_validation_report
from payops.tasks.reports.artifacts import artifact_key, markdown_table, report_lines
from payops.tasks.reports.run_reports import ensure_reports_spare_source, report_paths
from payops.tasks.reports.tabular_reports import write_table_reports
from payops.tasks.runtime.clients import open_clients
from payops.tasks.runtime.credentials import load_settings
from payops.tasks.runtime.progress import progress
from payops.tasks.runtime.run_outcomes import Outcome
from payops.tasks.runtime.run_summary import RowProblem
from payops.tasks.utility_purchases import (
    CHUNK_SIZE,
    PurchaseOutcome,
    Quotes,
    UtilitySheet,
    canonical_rows,
    chunks,
    needs_attention,
    poll_purchases_task,
    products_task,
    purchase_chunk_task,
    purchase_orders,
    quotes_task,
    read_utility_sheet_task,
    result_headers,
    result_rows,
    validate_utility_sheet,
)
from payops.tasks.utility_purchases import PollResult as PurchasePollResult
from payops.tasks.wire.money import money
from payops.tasks.wire.references import content_label
from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact
from prefect.states import State
from prefect.utilities.annotations import quote as untraversed
from pydantic import Field

PurchaseRun = SheetRun[PurchaseRunSummary]
"""A utility purchase run's context, its typed summary filled phase by phase."""


class UtilityRunParams(SheetRunParams):
    """Parameters of a utility purchase run."""

    dry_run: bool = Field(False, description="Check the sheet and quote only; buy nothing.")
    poll_deadline_s: float = Field(
        600,
        gt=0,
        description="Seconds to follow purchases to their final status; unfinished ones are reported.",
    )
    chunk_size: int = Field(CHUNK_SIZE, ge=1, le=500, description="Purchases handled together as one step.")
    concurrency: int = Field(8, ge=1, le=64, description="Purchases sent at the same time within a step.")
    max_concurrent_chunks: int = Field(2, ge=1, le=16, description="Steps of purchases run at the same time.")


def _issues(items: list[Any]) -> list[RowProblem]:
    return [RowProblem(row=i.row, column=i.column, message=i.message) for i in items]


def _markdown(summary: dict[str, Any], attention: list[list[Any]], payops: PayopsSettings) -> str:
    """The summary artifact, from the summary's JSON."""
    lines = [f"# Utility purchases `{summary['label']}`", "", f"**Outcome:** {summary['outcome']}", ""]
    keys = ["rows_total", "rows_valid", "rows_invalid", "amount_total", "fee_total", "gross_total"]
    lines.append(markdown_table(keys, [[summary.get(k) for k in keys]]))
    if summary.get("purchases_by_status"):
        lines += ["", markdown_table(["status", "purchases"], summary["purchases_by_status"].items())]
    if summary.get("unresolved"):
        lines += [
            "",
            f"**Awaiting the service:** {len(summary['unresolved'])} purchase(s) outcome_unknown or "
            "refund_failed; the service resolves them; never buy them again under a new reference.",
        ]
    if attention:
        lines += ["", "## Rows needing attention", ""]
        lines.append(markdown_table(["row", "reference", "submission", "status", "reason"], attention[:200]))
    if summary.get("errors"):
        lines += ["", "## Sheet errors", ""]
        rows = [[e["row"], e["column"], e["message"]] for e in summary["errors"][:200]]
        lines.append(markdown_table(["row", "column", "problem"], rows))
    lines += report_lines(summary.get("report_files"), payops)
    return "\n".join(lines)


async def _publish(
    run: PurchaseRun, label: str, summary: PurchaseRunSummary, outcomes: dict[int, PurchaseOutcome]
) -> None:
    attention = [
        [o.row, o.reference, o.submission, o.status, o.failure_reason or o.error_code or ""]
        for o in outcomes.values()
        if needs_attention(o)
    ]
    await acreate_markdown_artifact(
        key=artifact_key(label, "utilities"),
        markdown=_markdown(summary.as_json(), attention, run.settings),
        description=label,
    )
    if attention:
        headers = ["row", "reference", "submission", "status", "reason"]
        await acreate_table_artifact(
            key=artifact_key(label, "utilities-attention"),
            table=[dict(zip(headers, r, strict=True)) for r in attention[:500]],
            description="Purchases refused, failed, refunded or not final (first 500)",
        )


@flow(name="utility-purchases", flow_run_name=sheet_run_name, log_prints=False)
async def utility_purchases(params: UtilityRunParams) -> State:
    """Read, validate against the products, quote, buy in chunks, poll to final, report.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `PurchaseRunSummary`."""
    payops = PayopsSettings.from_env()
    async with open_clients(payops):
        summary = await _utility_purchases(params, payops)
    return end_run(summary)


async def _utility_purchases(params: UtilityRunParams, payops: PayopsSettings) -> PurchaseRunSummary:
    """sheet → quotes (the pre-flight) → buy → poll → report, the payout flow's skeleton (flows/pipeline.py);
    a phase that ends the run returns its summary."""
    run: PurchaseRun = SheetRun.begin(params, payops, PurchaseRunSummary())
    settings = load_settings(params.credentials_block, run.settings)
    if isinstance(sheet := await _read(run, settings), PurchaseRunSummary):
        return sheet
    if isinstance(quotes := await _quote(run, sheet, settings), PurchaseRunSummary):
        return quotes
    outcomes, orders = await _buy(run, sheet, settings)
    poll, replayed = await _poll(run, outcomes, settings)
    return await _report(run, sheet, quotes, outcomes, orders, poll, replayed)


async def _end(run: PurchaseRun, outcome: Outcome) -> PurchaseRunSummary:
    """The run's end before its last phase: its summary, published."""
    summary = run.finish(outcome)
    await _publish(run, run.label, summary, {})
    return summary


async def _read(run: PurchaseRun, settings: PaymentsSettings) -> UtilitySheet | PurchaseRunSummary:
    """Read the sheet and validate it against the products on sale; a sheet with errors ends the run."""
    params, logger = run.params, run.logger
    raw = await asyncio.to_thread(read_utility_sheet_task, params.source, run.options)
    products, calls = await products_task(settings, params.rate_limit_per_s)
    run.meter.api_calls.update(calls)
    sheet: UtilitySheet = validate_utility_sheet(raw, params.source, products, run.options)
    run.meter.phase("read_validate")
    logger.info(
        "sheet read: %d rows (%d valid, %d invalid)", sheet.rows_total, len(sheet.rows), sheet.rows_invalid
    )
    run.label = params.label or content_label(canonical_rows(sheet.rows))
    await tag_run(run.label)
    ensure_reports_spare_source(params.report_dir, run.label, params.source)
    run.summary = PurchaseRunSummary(
        label=run.label,
        source=params.source,
        outcome=Outcome.COMPLETED,
        rows_total=sheet.rows_total,
        rows_valid=len(sheet.rows),
        rows_invalid=sheet.rows_invalid,
        errors=_issues(sheet.errors),
        warnings=_issues(sheet.warnings),
        amount_total=money(sum((r.amount for r in sheet.rows), Decimal(0))),
    )
    if sheet.errors or not sheet.rows:
        if not sheet.errors:
            run.summary.errors = [RowProblem(row=0, column="", message="the sheet has no purchase rows")]
        path = report_paths(params.report_dir, run.label)["validation"]
        run.summary.report_files = {
            "validation": str(
                await asyncio.to_thread(write_validation_report, sheet.as_intake_result(), path)
            )
        }
        logger.error("sheet refused: %d invalid row(s); nothing bought", sheet.rows_invalid)
        return await _end(run, Outcome.INVALID_INPUT)
    return sheet


async def _quote(
    run: PurchaseRun, sheet: UtilitySheet, settings: PaymentsSettings
) -> Quotes | PurchaseRunSummary:
    """The pre-flight: a fee quote per distinct product and amount, and the wallet; a refused quote ends the
    run (nothing bought), and so does a dry run."""
    params, logger, summary = run.params, run.logger, run.summary
    keys = [(r.product_id, r.amount) for r in sheet.rows]
    progress().phase("quoting")
    quotes = await quotes_task(settings, untraversed(keys), params.rate_limit_per_s)
    run.meter.api_calls.update(quotes.api_calls)
    refused_quotes = {k: q for k, q in quotes.by_key.items() if q.error_code}
    gross = [quotes.by_key[k].gross for k in keys if quotes.by_key[k].gross is not None]
    fees = [quotes.by_key[k].fee for k in keys if quotes.by_key[k].fee is not None]
    wallet_gross = sum(
        (
            quotes.by_key[(r.product_id, r.amount)].gross or Decimal(0)
            for r in sheet.rows
            if r.funding == "wallet"
        ),
        Decimal(0),
    )
    summary.quotes = len(quotes.by_key)
    summary.fee_total = money(sum(fees, Decimal(0)))
    summary.gross_total = money(sum(gross, Decimal(0)))
    summary.wallet_gross_total = money(wallet_gross)
    available = quotes.wallet_available
    summary.wallet_available = money(available) if available is not None else None
    if available is not None and wallet_gross > available:
        summary.note(
            f"wallet-funded total {money(wallet_gross)} is above the available "
            f"{money(available)} (purchases bought by an earlier run are not bought again)"
        )
    run.meter.phase("quote")
    logger.info(
        "pre-flight: %d quote(s), amount %s, fees %s, gross %s, %d refused",
        len(quotes.by_key),
        summary.amount_total,
        summary.fee_total,
        summary.gross_total,
        len(refused_quotes),
    )
    if refused_quotes:
        for r in sheet.rows:
            q = refused_quotes.get((r.product_id, r.amount))
            if q is not None:
                message = f"{q.error_code}: {q.error_message}"
                summary.errors = [*summary.errors, RowProblem(row=r.row, column="amount", message=message)]
        summary.rows_invalid = len({e.row for e in summary.errors})
        logger.error("the service refused %d fee quote(s): nothing bought", len(refused_quotes))
        return await _end(run, Outcome.INVALID_INPUT)
    if params.dry_run:
        logger.info("dry run %s: nothing bought", run.label)
        return await _end(run, Outcome.DRY_RUN)
    return quotes


async def _buy(
    run: PurchaseRun, sheet: UtilitySheet, settings: PaymentsSettings
) -> tuple[dict[int, PurchaseOutcome], list[Any]]:
    """Purchases in chunks, one task each (bounded concurrency inside), references fixed by label and row."""
    params = run.params
    orders = purchase_orders(sheet.rows, run.label)
    parts = chunks(orders, params.chunk_size)
    run.summary.chunks = len(parts)

    async def send_one(index: int) -> tuple[list[PurchaseOutcome], Counter[str]]:
        return await purchase_chunk_task(
            settings, index, untraversed(parts[index]), params.concurrency, params.rate_limit_per_s
        )

    def said(done: int, total: int, result: tuple[list[PurchaseOutcome], Counter[str]]) -> str:
        items = result[0]
        accepted = sum(1 for o in items if o.submission == "accepted")
        refused = len(items) - accepted
        return f"chunk {done}/{total} sent: {len(items)} purchases, {accepted} accepted, {refused} refused"

    results = await send_parts(
        len(parts), send_one, max_concurrent=params.max_concurrent_chunks, said=said, logger=run.logger
    )
    outcomes: dict[int, PurchaseOutcome] = {}
    for items, calls in results:
        run.meter.api_calls.update(calls)
        outcomes.update({o.row: o for o in items})
    run.meter.phase("purchase")
    return outcomes, orders


async def _poll(
    run: PurchaseRun, outcomes: dict[int, PurchaseOutcome], settings: PaymentsSettings
) -> tuple[PurchasePollResult, int]:
    """Every accepted purchase to its final status (or the deadline); also how many an earlier run had
    bought (created before this run started)."""
    params = run.params
    accepted = {o.reference: o for o in outcomes.values() if o.submission == "accepted"}
    created = [o.created_at for o in accepted.values() if o.created_at]
    replayed = sum(1 for c in created if c < run.started_wall)
    progress().phase("polling")
    poll = await poll_purchases_task(
        settings,
        untraversed(accepted),
        min(created) if created else None,
        params.poll_deadline_s,
        params.rate_limit_per_s,
    )
    run.meter.api_calls.update(poll.api_calls)
    for o in poll.outcomes.values():
        outcomes[o.row] = o
    run.meter.phase("poll")
    run.logger.info(
        "polling done after %d round(s): %s",
        poll.rounds,
        ", ".join(f"{k} {v}" for k, v in sorted(Counter(o.status for o in poll.outcomes.values()).items()))
        or "no purchases",
    )
    return poll, replayed


async def _report(
    run: PurchaseRun,
    sheet: UtilitySheet,
    quotes: Quotes,
    outcomes: dict[int, PurchaseOutcome],
    orders: list[Any],
    poll: PurchasePollResult,
    replayed: int,
) -> PurchaseRunSummary:
    """Totals by status, the reports and artifacts; the run's final summary."""
    params, logger, label, summary = run.params, run.logger, run.label, run.summary
    progress().phase("reporting")
    done = [o for o in outcomes.values() if o.submission == "accepted"]
    refused = [o for o in outcomes.values() if o.submission != "accepted"]
    summary.purchases = len(orders)
    summary.purchases_by_status = dict(sorted(Counter(o.status for o in done).items()))
    summary.refused_items = len(refused)
    summary.refused_by_code = dict(Counter(o.error_code for o in refused))
    summary.replayed_purchases = replayed
    summary.unresolved = sorted(o.reference for o in done if o.status in UTILITY_PURCHASE_AWAITING_STATUSES)
    summary.not_final = sorted(o.reference for o in done if not o.final)
    summary.deadline_reached = poll.deadline_reached
    summary.poll_rounds = poll.rounds
    run.finish(Outcome.COMPLETED)
    headers = result_headers(sheet.columns)
    rows = result_rows(sheet, outcomes, quotes.by_key)
    highlight = [needs_attention(outcomes.get(int(rec["__row__"]))) for rec in sheet.table]
    summary.report_files = await asyncio.to_thread(
        write_table_reports, params.report_dir, label, headers, rows, summary.as_json(), highlight=highlight
    )
    run.meter.phase("report")
    summary.duration_s = run.meter.elapsed
    await _publish(run, label, summary, outcomes)
    for ref in summary.unresolved:
        logger.warning(
            "purchase %s awaits the service (%s): not bought again", ref, poll.outcomes[ref].status
        )
    logger.info(
        "reports written for %s: %s",
        label,
        ", ".join(f"{k} {v}" for k, v in (summary.report_files or {}).items()),
    )
    logger.info(
        "utility run %s done: %s; %d refused by the service",
        label,
        ", ".join(f"{k} {v}" for k, v in summary.purchases_by_status.items()) or "no purchases",
        summary.refused_items,
    )
    return summary
