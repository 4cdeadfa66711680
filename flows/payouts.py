"""Flow `payout-spreadsheet`: a payout sheet paid exactly once, polled to final, reported."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Literal

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact
from prefect.states import State
from prefect.utilities.annotations import quote as untraversed
from pydantic import Field, field_validator

from flows.approval import Answer, ask_approval, resume_description
from flows.outcomes import end_run, state_message
from flows.run_params import SheetRunParams, Text, sheet_run_name, start_sheet_run, tag_run
from flows.summaries import Decision, PayoutRunSummary
from tasks.alerts import PAYOUT_RUN_HOOKS, emit_needs_approval, emit_payout_outcome
from tasks.approvals import (
    ApprovalKeyMissing,
    ApprovalRefused,
    Requirement,
    load_approval_key,
    read_rule,
)
from tasks.artifacts import artifact_key, markdown_table, publish_run_artifacts, publish_run_record
from tasks.attention import attention_rows
from tasks.batching import batch_count, build_batch
from tasks.clients import open_clients
from tasks.credentials import CredentialsMissing, load_settings
from tasks.intake import IntakeResult, PayoutRow
from tasks.lookup_cache import CachePolicy
from tasks.memory import release_freed_memory
from tasks.money import money
from tasks.polling import AWAITING_REVIEW, PayoutState, poll_payouts_task
from tasks.preflight import Preflight, PreflightOptions, preflight_task
from tasks.progress import progress
from tasks.ratelimit import LimiterStats
from tasks.reports import RowOutcome, ensure_reports_spare_source, write_reports
from tasks.sheet_check import intake_summary, refusal_summary, refuses, run_label
from tasks.sheet_tasks import SheetRefused, read_sheet_task, write_validation_report_task
from tasks.submission import BatchResult, submit_batch_task


class PayoutRunParams(SheetRunParams):
    """Parameters of a payout run."""

    dry_run: bool = Field(False, description="Check the sheet and run the pre-flight only; send nothing.")
    on_invalid_rows: Literal["refuse", "skip"] = Field(
        "refuse",
        description="refuse: any invalid row stops the whole sheet; skip: pay the valid rows, report the "
        "others.",
    )
    require_approval: bool = Field(False, description="Always wait for an approval before sending anything.")
    approval_threshold: str = Field(
        "",
        pattern=r"^(\d+(\.\d{1,2})?)?$",
        description="Wait for an approval when the sheet's total amount is at least this (e.g. 50000.00). "
        "Leave empty for no threshold.",
    )
    approval_rule: Text = Field(
        "",
        description="Filled in by the console (who may approve and how many approvals are needed). "
        "Leave empty when starting a run here.",
    )
    approval_timeout_s: int = Field(
        3600, ge=10, description="Seconds to wait for an approval; no answer by then counts as a rejection."
    )
    poll_deadline_s: float = Field(
        900,
        gt=0,
        description="Seconds to follow payouts to their final status; unfinished ones are reported.",
    )
    check_names: bool = Field(
        True,
        description="Look up each account holder's name and compare it with the payee name of the sheet.",
    )
    block_on_name_mismatch: bool = Field(
        False, description="Stop the run before sending when a payee name does not match the account holder."
    )
    preflight_concurrency: int = Field(
        16, ge=1, le=128, description="Account and fee look-ups made at the same time during the pre-flight."
    )
    exact_fees: bool = Field(
        False,
        description="Ask the service for the fee of every distinct amount, not an estimate between quotes.",
    )
    use_lookup_cache: bool = Field(
        True, description="Reuse account holder names and fee quotes looked up by earlier runs."
    )
    name_cache_ttl_s: int = Field(
        7 * 86400, ge=0, description="Seconds a looked-up account holder name is reused."
    )
    quote_cache_ttl_s: int = Field(900, ge=0, description="Seconds a fee quote is reused.")
    lookup_failure_ttl_s: int = Field(
        300,
        ge=0,
        le=3600,
        description="Seconds a 'no such account' answer is remembered (temporary errors never are).",
    )
    allow_preflight_problems: bool = Field(
        False,
        description="Send even when the pre-flight finds the balance or limits short (some payouts may "
        "then be refused).",
    )
    max_concurrent_batches: int = Field(
        4, ge=1, le=32, description="Batches of up to 100 payouts sent at the same time."
    )

    @field_validator("approval_threshold", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        """None means "not set"; an amount given as a number is written as text (never through float)."""
        if value is None:
            return ""
        return str(value) if isinstance(value, Decimal | int) else value

    @property
    def threshold_amount(self) -> Decimal | None:
        """The approval threshold as an amount, or None when not set."""
        return Decimal(self.approval_threshold) if self.approval_threshold else None


def _preflight_options(params: PayoutRunParams) -> PreflightOptions:
    return PreflightOptions(
        check_names=params.check_names,
        block_on_name_mismatch=params.block_on_name_mismatch,
        concurrency=params.preflight_concurrency,
        exact_fees=params.exact_fees,
        use_cache=params.use_lookup_cache,
        policy=CachePolicy(
            name_ttl=timedelta(seconds=params.name_cache_ttl_s),
            failure_ttl=timedelta(seconds=params.lookup_failure_ttl_s),
            quote_ttl=timedelta(seconds=params.quote_cache_ttl_s),
        ),
    )


def _preflight_markdown(label: str, pf: Preflight, rows: list[PayoutRow], approval: str | None) -> str:
    """The pre-flight artifact; ``approval`` is its approval line (required, or what was decided)."""
    lines = [f"# Pre-flight for `{label}`", ""]
    lines.append(
        markdown_table(
            [
                "currency",
                "payouts",
                "amount",
                "fees",
                "needed",
                "available",
                "daily left",
                "monthly left",
                "per transaction",
            ],
            [
                [
                    c.currency,
                    c.count,
                    c.amount,
                    c.fees,
                    c.needed,
                    c.available,
                    c.daily_remaining,
                    c.monthly_remaining,
                    c.per_transaction,
                ]
                for c in pf.currencies.values()
            ],
        )
    )
    counts = pf.cache_counts()
    lines += [
        "",
        "## Lookups and quotes",
        "",
        markdown_table(
            ["", "cached", "fresh", "failed"],
            [[kind.replace("_", " "), c["cached"], c["fresh"], c["failed"]] for kind, c in counts.items()],
        ),
    ]
    if pf.problems:
        lines += ["", "## Problems", ""] + [f"- {p}" for p in pf.problems]
    if pf.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in pf.notes]
    flagged = [n for n in pf.names if n.verdict != "match"]
    if flagged:
        lines += [
            "",
            "## Payee names",
            "",
            markdown_table(
                ["row", "number", "sheet name", "holder name", "verdict"],
                [[n.row, n.destination, n.sheet_name, n.holder_name, n.verdict] for n in flagged[:200]],
            ),
        ]
    if approval:
        lines += ["", approval]
    return "\n".join(lines)


def _outcomes(
    intake: IntakeResult, results: list[BatchResult], states: dict[str, PayoutState]
) -> dict[int, RowOutcome]:
    """Every row's outcome. Consumes ``results`` and ``states`` as it goes, so a 100,000-row run holds one
    copy of what happened to each row, not three."""
    out: dict[int, RowOutcome] = {}
    for e in intake.errors:
        o = out.setdefault(e.row, RowOutcome(e.row, submission="invalid", error_code="invalid_input"))
        msg = f"{e.column}: {e.message}"
        o.error_message = msg if not o.error_message else f"{o.error_message}; {msg}"
    results.reverse()
    while results:
        res = results.pop()
        for item in res.items:
            o = RowOutcome(item.row, reference=item.reference, batch=res.reference)
            if item.accepted:
                o.submission = "accepted"
                s = states.pop(item.reference, None)
                o.status = s.status if s else item.status
                o.fee = (s.fee if s and s.fee else None) or item.fee
                o.failure_reason = s.failure_reason if s else None
                o.completed_at = s.completed_at if s else None
            else:
                o.submission, o.error_code, o.error_message = "refused", item.code, item.message
            out[item.row] = o
    return out


async def _requirement(params: PayoutRunParams, total: Decimal) -> Requirement:
    """Approvals this run needs: the console's signed rule, at least one with require_approval/threshold."""
    legacy = int(
        params.require_approval or (params.threshold_amount is not None and total >= params.threshold_amount)
    )
    if not params.approval_rule:
        return Requirement(legacy)
    try:
        key = await load_approval_key()
    except ApprovalKeyMissing as exc:
        raise ApprovalRefused(str(exc)) from None
    need = read_rule(key, params.approval_rule, params.source, total)
    return Requirement(max(need.required, legacy), need.excluded, need.initiator)


@flow(name="payout-spreadsheet", flow_run_name=sheet_run_name, log_prints=False, **PAYOUT_RUN_HOOKS)
async def payout_spreadsheet(params: PayoutRunParams) -> State:
    """Read, validate, pre-flight, (approve), send in batches of 100, poll to final, report.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `PayoutRunSummary`.
    """
    try:
        async with open_clients():
            summary = PayoutRunSummary.model_validate(await _pay(params))
        try:
            await publish_run_record(summary.as_json())
        except Exception as exc:  # noqa: BLE001 - the payouts are done and reported; only `payops runs` loses it
            get_run_logger().warning("run record not published (%s): %s", type(exc).__name__, exc)
        emit_payout_outcome(summary)
        return end_run(summary)
    finally:
        progress().phase("done")


async def _refused(summary: dict[str, Any], decision: Decision | None = None) -> dict[str, Any]:
    """A run that sends nothing: its summary artifact says why (who decided, the first row errors, counts)."""
    model = PayoutRunSummary.model_validate(summary)
    model.decision = decision
    label = summary["label"] or PurePath(str(summary["source"])).stem
    await publish_run_artifacts(label, summary, None, why=state_message(model))
    summary["decision"] = decision
    return summary


async def _not_approved(
    summary: dict[str, Any],
    finish: Callable[[str], dict[str, Any]],
    comment: str,
    decision: Decision | None,
) -> dict[str, Any]:
    """The end of a run that needed approval and got none: the summary's ``approval`` says why."""
    summary["approval"] = {"approved": False, "comment": comment}
    return await _refused(finish("not_approved"), decision)


async def _pay(params: PayoutRunParams) -> dict[str, Any]:
    run = start_sheet_run(params)
    logger, meter = run.logger, run.meter
    intake = await asyncio.to_thread(read_sheet_task, params.source, run.options)
    meter.phase("read_validate")
    if isinstance(intake, SheetRefused):
        logger.error("sheet read: refused: %s; nothing sent", intake.message)
        return await _refused(meter.into(refusal_summary(params.source, params.label, intake.errors)))
    release_freed_memory(len(intake.rows))  # the parser's frame and the cells validation no longer needs
    logger.info(
        "sheet read: %d rows (%d valid, %d invalid)", intake.rows_total, len(intake.rows), intake.rows_invalid
    )
    label = run_label(params.label, intake)
    await tag_run(label)
    ensure_reports_spare_source(params.report_dir, label, params.source)
    summary = intake_summary(params.source, label, intake)

    def finish(outcome: str) -> dict[str, Any]:
        return meter.finish(summary, outcome)

    refused = refuses(intake, params.on_invalid_rows)
    if refused or params.dry_run and not intake.rows:
        summary["report_files"] = await asyncio.to_thread(
            write_validation_report_task, intake, params.report_dir, label
        )
        if refused:
            logger.error("sheet refused: %d invalid row(s); nothing sent", intake.rows_invalid)
            return await _refused(finish("invalid_input"))

    try:
        settings = load_settings(params.credentials_block)
    except CredentialsMissing as exc:
        if not params.dry_run:
            raise
        # A dry run is asked for its prices: without credentials it has none, and says so (exit 2).
        logger.error("dry run cannot price the sheet: %s; nothing sent", exc)
        problem = f"cannot price the sheet without credentials: {exc}"
        summary["preflight"] = {"problems": [problem], "notes": []}
        if "report_files" not in summary:
            summary["report_files"] = await asyncio.to_thread(
                write_validation_report_task, intake, params.report_dir, label
            )
        return await _refused(finish("preflight_failed"))
    total = sum((r.amount for r in intake.rows), Decimal(0))
    try:
        need = await _requirement(params, total)
    except ApprovalRefused as exc:
        if not params.dry_run:
            logger.error("approval rule refused: %s; nothing sent", exc)
            decision = Decision(kind="not_approved", reason=f"approval rule refused: {exc}")
            return await _not_approved(summary, finish, f"approval refused: {exc}", decision)
        need = Requirement(0)
    if need.initiator:
        summary["started_by"] = need.initiator
    needs_approval = need.required > 0
    pf = None
    if intake.rows and settings is not None:
        progress().phase("preflight")
        pf = await preflight_task(
            settings, untraversed(intake.rows), _preflight_options(params), params.rate_limit_per_s
        )
        meter.api_calls.update(pf.api_calls)
        summary["fee_total"] = money(pf.fee_total)
        summary["preflight"] = {
            "problems": pf.problems,
            "notes": pf.notes,
            "name_checks": Counter(n.verdict for n in pf.names),
            "cache": pf.cache_counts(),
            "rate_limit": pf.limiter.as_dict() if pf.limiter else None,
        }
        lookups = pf.cache_counts()
        logger.info(
            "pre-flight: total %s, fees %s, %d name mismatch(es), %d problem(s); lookups %s",
            money(pf.amount_total),
            money(pf.fee_total),
            len(pf.name_mismatches),
            len(pf.problems),
            "; ".join(
                f"{k.replace('_', ' ')} {c['cached']} cached/{c['fresh']} fresh/{c['failed']} failed"
                for k, c in lookups.items()
            )
            or "none",
        )
        await _preflight_artifact(label, pf, intake.rows, APPROVAL_REQUIRED if needs_approval else None)
        meter.phase("preflight")
        release_freed_memory(len(intake.rows))  # the lookups and quotes behind the pre-flight's figures
    if params.dry_run:
        if "report_files" not in summary:
            summary["report_files"] = await asyncio.to_thread(
                write_validation_report_task, intake, params.report_dir, label
            )
        logger.info("dry run %s: nothing sent", label)
        summary = finish("dry_run")
        await publish_run_artifacts(label, summary, [])
        return summary
    if pf is None:
        logger.error("no valid rows: nothing to send")
        return await _refused(finish("invalid_input"))
    if pf.problems and not params.allow_preflight_problems:
        for p in pf.problems:
            logger.error("pre-flight: %s", p)
        return await _refused(finish("preflight_failed"))
    if needs_approval:
        try:
            key = await load_approval_key()  # approvals are always signed: no key, no pause, nothing sent
        except ApprovalKeyMissing as exc:
            logger.error("%s; nothing sent", exc)
            return await _not_approved(
                summary, finish, str(exc), Decision(kind="not_approved", reason=str(exc))
            )
        emit_needs_approval(label, pf, params.approval_timeout_s)
        progress().phase("approval")
        description = resume_description(label, pf, intake.rows, intake.rows_invalid, need)
        answer = await ask_approval(label, params.approval_timeout_s, key, need, total, description)
        meter.phase("approval")
        await _preflight_artifact(label, pf, intake.rows, _decision_line(answer))
        if not answer.approved:
            logger.warning("run %s not approved: nothing sent", label)
            return await _not_approved(summary, finish, answer.comment, answer.refusal)
        summary["approval"] = {"approved": True, "comment": answer.comment, "approvers": answer.approvers}

    # Large task arguments go in `untraversed` (Prefect's `quote`): otherwise Prefect walks every row and
    # field of them looking for futures, twice per task run: ~0.1 s per 100-row batch (profiled).
    # Each batch is built when its turn comes (build_batch is pure: a retry or re-run builds the same).
    batches = batch_count(intake.rows)
    summary["batches"] = batches
    names = pf.release_row_detail()
    sem = asyncio.Semaphore(params.max_concurrent_batches)
    sent = 0
    progress().phase("sending")
    progress().batches(0, batches)

    async def send(index: int) -> BatchResult:
        nonlocal sent
        async with sem:
            batch = build_batch(intake.rows, label, index)
            result = await submit_batch_task(settings, untraversed(batch), params.rate_limit_per_s)
        sent += 1
        progress().batches(sent, batches)
        accepted = sum(1 for i in result.items if i.accepted)
        replayed_now = sum(
            1 for i in result.items if i.accepted and i.created_at and _before(i.created_at, run.started_wall)
        )
        logger.info(
            "batch %d/%d sent: %d payouts, %d accepted (%d replayed), %d refused",
            sent,
            batches,
            len(result.items),
            accepted,
            replayed_now,
            len(result.items) - accepted,
        )
        return result

    results: list[BatchResult] = await asyncio.gather(*(send(i) for i in range(batches)))
    for r in results:
        meter.api_calls.update(r.api_calls)
    limiters = [pf.limiter, *(r.limiter for r in results)]
    meter.phase("submit")
    release_freed_memory(len(intake.rows))  # the batches' request bodies and answers

    states: dict[str, PayoutState] = {}
    replayed = 0
    for r in results:
        for item in r.items:
            if item.accepted:
                created = datetime.fromisoformat(item.created_at) if item.created_at else None
                states[item.reference] = PayoutState(
                    item.reference, item.status or "accepted", fee=item.fee, created_at=created
                )
                if created is not None and created < run.started_wall:
                    replayed += 1
    progress().phase("polling")
    poll = await poll_payouts_task(
        settings, untraversed(states), params.poll_deadline_s, params.rate_limit_per_s, label
    )
    meter.api_calls.update(poll.api_calls)
    used = [x for x in (*limiters, poll.limiter) if x is not None]
    summary["rate_limit"] = LimiterStats.combine(used).as_dict()
    states = poll.states
    meter.phase("poll")
    release_freed_memory(len(intake.rows))  # the pages of the payout list
    final_by_status = Counter(s.status for s in states.values())
    logger.info(
        "polling done after %d round(s): %s%s",
        poll.rounds,
        ", ".join(f"{k} {v}" for k, v in sorted(final_by_status.items())) or "no payouts",
        f"; {sum(1 for s in states.values() if not s.final)} not final at the deadline"
        if poll.deadline_reached
        else "",
    )

    progress().phase("reporting")
    awaiting_review = sorted(r for r, s in states.items() if s.status in AWAITING_REVIEW)
    not_final = sorted(r for r, s in states.items() if not s.final)
    outcomes = _outcomes(intake, results, states)
    by_status = Counter(o.status for o in outcomes.values() if o.submission == "accepted")
    refused_items = [o for o in outcomes.values() if o.submission == "refused"]
    summary.update(
        {
            "payouts_by_status": dict(sorted(by_status.items())),
            "refused_items": len(refused_items),
            "refused_by_code": dict(Counter(o.error_code for o in refused_items)),
            "replayed_payouts": replayed,
            "awaiting_review": awaiting_review,
            "not_final": not_final,
            "deadline_reached": poll.deadline_reached,
            "poll_rounds": poll.rounds,
            "poll_calls_per_round": poll.calls_per_round,
            "attention_rows": attention_rows(intake.rows, outcomes, names),
        }
    )
    fees = [Decimal(o.fee) for o in outcomes.values() if o.fee and o.submission == "accepted"]
    if fees:
        summary["fee_total"] = money(sum(fees, Decimal(0)))
    reference_column = next((c for c in intake.columns if c.strip().lower() in {"reference", "ref"}), None)
    finish("completed")
    paths = await asyncio.to_thread(
        write_reports,
        params.report_dir,
        label,
        intake.columns,
        intake.table,
        outcomes,
        summary,
        reference_column,
    )
    meter.phase("report")
    summary["duration_s"] = meter.elapsed
    attention = [
        [o.row, o.reference, o.submission, o.status, o.failure_reason, o.error_code]
        for o in outcomes.values()
        if o.submission != "accepted" or o.status in {"failed", "refunded", "in_review", "held"}
    ]
    await publish_run_artifacts(label, summary, attention)
    logger.info("reports written for %s: %s", label, ", ".join(f"{k} {v}" for k, v in (paths or {}).items()))
    logger.info(
        "run %s done: %s; %d refused by the service",
        label,
        ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())) or "no payouts",
        len(refused_items),
    )
    return summary


APPROVAL_REQUIRED = "**Approval required**: nothing is sent until this run is approved."


def _decision_line(answer: Answer) -> str:
    """The pre-flight artifact's approval line once decided."""
    if answer.approved:
        who = ", ".join(answer.approvers) or "the Resume dialog (unsigned)"
        return f"**Approved** by {who}" + (f": {answer.comment}" if answer.comment else "") + "; sending."
    refusal = answer.refusal
    if refusal is not None and refusal.kind == "rejected":
        who = refusal.by or "an unnamed user (Prefect UI or API)"
        return (
            f"**Rejected** by {who}" + (f": {refusal.reason}" if refusal.reason else "") + "; nothing sent."
        )
    return f"**Not approved**: {refusal.reason if refusal else answer.comment}; nothing sent."


async def _preflight_artifact(label: str, pf: Preflight, rows: list[PayoutRow], approval: str | None) -> None:
    await acreate_markdown_artifact(
        key=artifact_key(label, "preflight"),
        markdown=_preflight_markdown(label, pf, rows, approval),
        description=f"Pre-flight of payout run {label}",
    )


def _before(created_at: str, moment: datetime) -> bool:
    return datetime.fromisoformat(created_at) < moment
