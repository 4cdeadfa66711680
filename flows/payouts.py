"""Flow `payout-spreadsheet`: a payout sheet paid exactly once, polled to final, reported."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Literal

from payops.connectors.payments import PaymentsSettings
from payops.flows.approval import (
    Answer,
    Ask,
    approved_before,
    ask_approval,
    resume_description,
    wait_suspended,
)
from payops.flows.flow_decorator import flow
from payops.flows.outcomes import WITH_FAILURES, end_run, keep_summary, state_message
from payops.flows.payout_parts import (
    RunRows,
    batch_said,
    invalid_outcomes,
    poll_parts_of,
    send_parts_of,
)
from payops.flows.pipeline import SheetRun
from payops.flows.run_params import (
    FAILURES_TAG,
    PAYOUT_TAG,
    SheetRunParams,
    Text,
    add_run_tags,
    sheet_run_name,
    tag_run,
)
from payops.store.database import NoDatabase, RunDatabase
from payops.store.settings import PayopsSettings
from payops.tasks.approval.approval_gate import (
    ApprovalDesk,
    PolicyUnreadable,
    currency_figures,
    findings,
    payops_store,
    read_policy,
    request_rows,
    requirement,
    totals_by_currency,
    unsigned_start,
)
from payops.tasks.approval.approval_keys import ApprovalKeyMissing, load_verify_key
from payops.tasks.approval.approvals import (
    ApprovalRefused,
    Requirement,
    Start,
    Subject,
    fingerprint,
    read_start,
    row_fields,
)
from payops.tasks.approval.outcome_notices import PAYOUT_RUN_HOOKS, people, start_of, tell_outcome
from payops.tasks.approval.run_approvals import with_decisions
from payops.tasks.events.alerts import emit_needs_approval, emit_payout_outcome
from payops.tasks.intake import IntakeResult
from payops.tasks.intake.columns import ColumnMapError, parse_column_map
from payops.tasks.intake.streaming import streams
from payops.tasks.ledger.run_reconciliation import (
    SentSpan,
    reconcile_at_run_end,
    refused_references,
)
from payops.tasks.payouts.held_rows import HeldRows
from payops.tasks.payouts.lookup_cache import CachePolicy
from payops.tasks.payouts.paid_before import PaidBefore, paid_before
from payops.tasks.payouts.polling import PollResult
from payops.tasks.payouts.preflight import Preflight, PreflightOptions, preflight_task
from payops.tasks.payouts.retry_rows import FailureLog, RetryRows, mark_retried, retry_store
from payops.tasks.payouts.run_summary import (
    ApprovalRecord,
    Decision,
    PayoutRunSummary,
    PreflightFigures,
)
from payops.tasks.payouts.sheet_check import (
    intake_summary,
    no_name_column,
    refusal_summary,
    refuses,
    run_label,
    sheet_fingerprint,
)
from payops.tasks.payouts.sheet_tasks import (
    SheetRefused,
    read_sheet_task,
    read_spilled_task,
    write_validation_report_task,
)
from payops.tasks.payouts.spill_views import SpilledRun, SpillSink
from payops.tasks.reports.artifacts import (
    artifact_key,
    markdown_table,
    publish_run_artifacts,
    publish_run_record,
)
from payops.tasks.reports.attention import attention_rows, attention_table
from payops.tasks.reports.money_moved import MoneyMoved
from payops.tasks.reports.run_reports import ensure_reports_spare_source, write_reports
from payops.tasks.rows.name_check import NameCheck
from payops.tasks.rows.outcome import RowFacts, RowOutcome
from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.runtime.clients import open_clients
from payops.tasks.runtime.credentials import CredentialsMissing, load_settings
from payops.tasks.runtime.inflight import DEFAULT_CAP, MAX_IN_FLIGHT
from payops.tasks.runtime.memory import release_freed_memory
from payops.tasks.runtime.progress import progress
from payops.tasks.runtime.ratelimit import LimiterStats
from payops.tasks.runtime.run_outcomes import Outcome
from payops.tasks.runtime.scratch import scratch_dir
from payops.tasks.wire.money import money
from payops.tasks.wire.references import payout_reference
from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact
from prefect.states import State
from prefect.utilities.annotations import quote as untraversed
from pydantic import Field, field_validator
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

if TYPE_CHECKING:
    from payops.store.approvals import ApprovalPolicy


class PayoutRunParams(SheetRunParams):
    """Parameters of a payout run."""

    dry_run: bool = Field(False, description="Check the sheet and run the pre-flight only; send nothing.")
    on_invalid_rows: Literal["refuse", "skip"] = Field(
        "refuse",
        description="refuse: any invalid row stops the whole sheet; skip: pay the valid rows, report the "
        "others.",
    )
    require_approval: bool = Field(
        False,
        description="Wait for at least one approval even where the approval policy asks for none. The policy "
        "(set by an admin in the console) always applies; this can only add to it.",
    )
    approval_threshold: str = Field(
        "",
        pattern=r"^(\d+(\.\d{1,2})?)?$",
        description="Wait for at least one approval when a currency's total is at least this (e.g. "
        "50000.00), on top of the approval policy. Leave empty for none.",
    )
    start: Text = Field(
        "",
        description="Filled in by the payops server (who started the run, signed). Leave empty here: a run "
        "started from Prefect has no payops initiator, and no holder of Prefect's login may approve it.",
    )
    approval_timeout_s: int = Field(
        3600, ge=10, description="Seconds to wait for an approval; no answer by then counts as a rejection."
    )
    approval_reminder_s: int = Field(
        600,
        ge=0,
        description="Seconds before the approval deadline to remind the approvers (0: no reminder).",
    )
    poll_deadline_s: float = Field(
        900,
        gt=0,
        description="Seconds to follow payouts to their final status; unfinished ones are reported.",
    )
    settle_window_s: float = Field(
        60,
        ge=0,
        description="Seconds a payout in review or held is waited for before the run ends and reports; it is "
        "followed afterwards (payops payouts followup, the payment webhooks).",
    )
    check_names: bool = Field(
        True,
        description="Look up each account holder's name and compare it with the payee name of the sheet.",
    )
    block_on_name_mismatch: bool = Field(
        False, description="Stop the run before sending when a payee name does not match the account holder."
    )
    preflight_concurrency: int = Field(
        DEFAULT_CAP,
        ge=1,
        le=MAX_IN_FLIGHT,
        description="The most account and fee look-ups in flight during the pre-flight (fewer when the "
        "service's pace and round trip need fewer).",
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
        8, ge=1, le=32, description="Batches of up to 100 payouts sent at the same time."
    )
    column_map: Text = Field(
        "",
        description="Which sheet column holds which field, when its header is not one payops knows: "
        '"Full Name=payee_name; Staff Mobile=destination". Part of the run\'s fingerprint.',
    )
    currency: str | None = Field(
        None,
        pattern=r"^[A-Z]{3}$",
        description="The sheet's currency when it has no currency column (and for its blank currency cells), "
        "e.g. GHS; an amount header naming another one refuses the sheet. Part of the run's fingerprint.",
    )

    @field_validator("approval_threshold", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        """None means "not set"; an amount given as a number is written as text (never through float)."""
        if value is None:
            return ""
        return str(value) if isinstance(value, Decimal | int) else value

    @field_validator("currency", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        """An empty currency (a form left blank) means none was chosen."""
        return None if value == "" else value

    @field_validator("column_map")
    @classmethod
    def _readable_mapping(cls, value: str) -> str:
        """A mapping that cannot be read is refused with the run's parameters, before anything starts."""
        try:
            parse_column_map(value)
        except ColumnMapError as exc:
            raise ValueError(str(exc)) from None
        return value

    @property
    def columns(self) -> dict[str, str]:
        """The explicit column mapping, ``{header: field}`` (empty when none was given)."""
        return parse_column_map(self.column_map)

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


async def _start(params: PayoutRunParams, settings: PayopsSettings, store: RunDatabase) -> Start:
    """Who started this run: the start the payops server signed, else nobody in payops, and then every
    holder of Prefect's login (read from the payops database) could have started it."""
    if not params.start:
        if isinstance(store, NoDatabase):
            raise PolicyUnreadable(store.reason)
        return await asyncio.to_thread(unsigned_start, store)
    try:
        key = await asyncio.to_thread(load_verify_key, settings)  # the public half: flows never sign
    except ApprovalKeyMissing as exc:
        raise ApprovalRefused(str(exc)) from None
    return read_start(key, params.start, params.source)


@flow(name="payout-spreadsheet", flow_run_name=sheet_run_name, log_prints=False, **PAYOUT_RUN_HOOKS)
async def payout_spreadsheet(params: PayoutRunParams) -> State:
    """Read, validate, pre-flight, (approve), send in batches of 100, poll to final, report.

    Ends in the state `flows.outcomes.end_run` gives its outcome, carrying the `PayoutRunSummary`. The payops
    settings are read here, once, and passed on.
    """
    settings = PayopsSettings.from_env()
    await add_run_tags(PAYOUT_TAG)
    if (stop := _too_many_starts()) is not None:
        return stop
    try:
        async with open_clients(settings), payops_store(settings) as store:
            summary = await _pay(params, store, settings)
            await keep_summary(store, summary)
            # whose run it is: told the outcome by notice, named in the alert (tasks.approval.outcome_notices)
            who = people(await asyncio.to_thread(start_of, params.start, params.source, settings))
            if isinstance(store, Engine):
                await tell_outcome(store, _run_id(), summary, who)
        try:
            await publish_run_record(summary.as_json())
        except Exception as exc:  # noqa: BLE001 - the payouts are done and reported; only `payops runs` loses it
            get_run_logger().warning("run record not published (%s): %s", type(exc).__name__, exc)
        emit_payout_outcome(summary, people=who)
        state = end_run(summary)
        if state.name == WITH_FAILURES:  # a green badge in Prefect's UI: the tag says it (FAILURES_TAG)
            await add_run_tags(FAILURES_TAG)
        return state
    finally:
        progress().phase("done")


MAX_STARTS = 25
"""A payout run started more often than this (Prefect's run count: each start, restart after a crash and
resume from an approval pause) is not run again: a crash that repeats would otherwise restart it for ever
(deployments/automations/recovery). Each start replays what the last one sent, so the count is generous."""


def _too_many_starts() -> State | None:
    """The Failed state of a run started more than `MAX_STARTS` times (None: go on)."""
    from prefect.runtime import flow_run
    from prefect.states import Failed

    starts = int(flow_run.run_count or 1)
    if starts <= MAX_STARTS:
        return None
    return Failed(
        message=f"started {starts} times (crashes that repeat): not run again; read the worker's log, then "
        "start the sheet again under the same label once the cause is fixed (a new run replays what was sent)"
    )


async def _refused(
    run: PayoutRun, summary: PayoutRunSummary, decision: Decision | None = None
) -> PayoutRunSummary:
    """A run that sends nothing: its summary artifact says why (who decided, the first row errors, counts)."""
    summary.decision = decision
    label = summary.label or PurePath(str(summary.source)).stem
    await publish_run_artifacts(label, summary.as_json(), None, run.settings, why=state_message(summary))
    return summary


async def _not_approved(
    run: PayoutRun, store: RunDatabase, comment: str, decision: Decision | None
) -> PayoutRunSummary:
    """The end of a run that needed approval and got none: the summary's ``approval`` says why."""
    run.summary.approval = await with_decisions(ApprovalRecord(approved=False, comment=comment), store)
    return await _refused(run, run.finish(Outcome.NOT_APPROVED), decision)


PayoutRun = SheetRun[PayoutRunSummary]
"""A payout run's context: its summary is typed from its first phase."""


# -- the phases' results ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sheet:
    """The read and validated sheet, and the explicit column mapping it was read with."""

    intake: IntakeResult
    columns: dict[str, str]
    spill: SpilledRun | None = None
    """Where the rows and outcomes of a sheet too large to hold live (`flows.payout_parts`)."""


@dataclass(frozen=True)
class Gate:
    """Who started the run, the approval policy in force, and what it asks of this run."""

    start: Start
    policy: ApprovalPolicy | None
    need: Requirement
    engine: Engine | None = None
    """The payops database the policy was read from (None when it was not read: then nothing is asked)."""


# -- the pipeline -------------------------------------------------------------------------------------------
async def _pay(params: PayoutRunParams, store: RunDatabase, payops: PayopsSettings) -> PayoutRunSummary:
    """sheet → pre-flight → approval → send → poll → report. A phase returns its result, or the run's final
    summary when the run ends there (a refused sheet, a dry run, no approval): a value, returned as it is."""
    run = SheetRun.begin(params, payops, PayoutRunSummary())
    with ExitStack() as held:
        if isinstance(sheet := await _read(run, held), PayoutRunSummary):
            return sheet
        if isinstance(settings := await _settings(run, sheet), PayoutRunSummary):
            return settings
        if isinstance(gate := await _gate(run, sheet, store), PayoutRunSummary):
            return gate
        if isinstance(pf := await _preflight(run, sheet, gate, settings), PayoutRunSummary):
            return pf
        rows: RunRows = (
            sheet.spill if sheet.spill is not None else HeldRows(sheet.intake.rows, pf.fees_by_row, pf.names)
        )
        if (ended := await _approval(run, sheet, rows, pf, gate)) is not None:
            return ended
        return await _send_and_follow(run, sheet, rows, pf, settings, retry_store(store))


async def _send_and_follow(
    run: PayoutRun,
    sheet: Sheet,
    spill: RunRows,
    pf: Preflight,
    settings: PaymentsSettings,
    retries: RetryRows | None,
) -> PayoutRunSummary:
    """Send, poll and report the sheet a part at a time (`flows.payout_parts`): a sheet held whole is one
    part; refused and failed rows are recorded as they happen, so a retry can pay them while the others still
    move (`tasks.payouts.retry_rows`)."""
    part_rows = None if sheet.spill is not None else max(1, len(spill))  # None: a spill's part size
    failures = FailureLog(retries, run.label, sheet.intake, run.params.column_map, _run_id(), run.logger)
    spill.record(invalid_outcomes(sheet.intake))
    done = await send_parts_of(run, spill, settings, failures, batch_said(run.started_wall), part_rows)
    pf.release_row_detail()
    done = await poll_parts_of(run, spill, settings, failures, done)
    spill.forget_states()  # each in its row's outcome now
    release_freed_memory(len(spill))  # the states and the pages of the payout list
    waiting = done.waiting or PollResult(states={})
    waiting.rounds, waiting.calls_per_round = done.rounds, done.calls_per_round
    retried = await _mark_retried_parts(retries, run.label, spill)
    ending = Ending(done.created, waiting, [pf.limiter, *done.limiters], retried)
    return await _close(run, sheet, pf, settings, spill.outcome_map(), spill.fact_map(), ending)


async def _read(run: PayoutRun, held: ExitStack) -> Sheet | PayoutRunSummary:
    """Read and validate the sheet, name the run; a sheet refused whole (or for invalid rows) ends it. A csv
    too large to hold is read into a spill file that ``held`` closes and deletes when the run ends."""
    params, logger = run.params, run.logger
    columns = params.columns  # the explicit column mapping, read by the intake and the label
    options = run.options.model_copy(update={"column_map": columns, "default_currency": params.currency})
    spill = None
    if streams(params.source, run.settings.stream_csv_over_bytes):
        work = Path(held.enter_context(scratch_dir("run")))  # a killed run's is swept by the next
        spill = held.enter_context(SpilledRun(work / "rows.sqlite3"))
        intake = await asyncio.to_thread(read_spilled_task, params.source, options, untraversed(spill))
    else:
        intake = await asyncio.to_thread(read_sheet_task, params.source, options)
    run.meter.phase("read_validate")
    if isinstance(intake, SheetRefused):
        logger.error("sheet read: refused: %s; nothing sent", intake.message)
        refusal = refusal_summary(params.source, params.label, intake.errors)
        return await _refused(run, run.meter.into(refusal))
    release_freed_memory(len(intake.rows))  # the parser's frame and the cells validation no longer needs
    logger.info(
        "sheet read: %d rows (%d valid, %d invalid)", intake.rows_total, len(intake.rows), intake.rows_invalid
    )
    run.label = run_label(params.label, intake, columns, params.currency)
    run.sheet = sheet_fingerprint(intake, columns, params.currency) if params.label else run.label
    await tag_run(run.label)
    ensure_reports_spare_source(params.report_dir, run.label, params.source)
    run.summary = intake_summary(params.source, run.label, intake, columns)
    refused = refuses(intake, params.on_invalid_rows)
    if refused or params.dry_run and not intake.rows:
        run.summary.report_files = await asyncio.to_thread(
            write_validation_report_task, intake, params.report_dir, run.label
        )
        if refused:
            logger.error("sheet refused: %d invalid row(s); nothing sent", intake.rows_invalid)
            return await _refused(run, run.finish(Outcome.INVALID_INPUT))
    return Sheet(intake, columns, spill)


async def _settings(run: PayoutRun, sheet: Sheet) -> PaymentsSettings | PayoutRunSummary:
    """The service's settings; without them a run cannot send, and a dry run cannot price: it ends refused."""
    try:
        return load_settings(run.params.credentials_block, run.settings)
    except CredentialsMissing as exc:
        if not run.params.dry_run:
            raise
        # A dry run is asked for its prices: without credentials it has none, and says so (exit 2).
        run.logger.error("dry run cannot price the sheet: %s; nothing sent", exc)
        problem = f"cannot price the sheet without credentials: {exc}"
        run.summary.preflight = PreflightFigures(problems=[problem], notes=[])
        if run.summary.report_files is None:
            run.summary.report_files = await asyncio.to_thread(
                write_validation_report_task, sheet.intake, run.params.report_dir, run.label
            )
        return await _refused(run, run.finish(Outcome.PREFLIGHT_FAILED))


async def _gate(run: PayoutRun, sheet: Sheet, store: RunDatabase) -> Gate | PayoutRunSummary:
    """Who started the run and what the approval policy asks of it; unreadable, the run ends Not approved."""
    params = run.params
    try:
        start = await _start(params, run.settings, store)
        if isinstance(store, NoDatabase):
            raise PolicyUnreadable(store.reason)
        policy = await asyncio.to_thread(read_policy, store)
    except (ApprovalRefused, PolicyUnreadable) as exc:
        if not params.dry_run:
            run.logger.error("approval: %s; nothing sent", exc)
            decision = Decision(kind="not_approved", reason=str(exc))
            return await _not_approved(run, store, f"approval refused: {exc}", decision)
        run.summary.note(f"approval not checked: {exc}")
        return Gate(Start(), None, Requirement(0))
    totals = totals_by_currency(sheet.intake.rows)
    need = requirement(
        policy, totals, start, require_approval=params.require_approval, threshold=params.threshold_amount
    )
    run.summary.approvals_required = need.required
    if start.initiator:
        run.summary.started_by = start.initiator
    return Gate(start, policy, need, store)


async def _preflight(
    run: PayoutRun, sheet: Sheet, gate: Gate, settings: PaymentsSettings | None
) -> Preflight | PayoutRunSummary:
    """Fees, balance, limits and payee names before anything is sent; a dry run ends after it, and so does a
    run whose pre-flight finds problems (unless they are allowed)."""
    params, logger, summary, intake = run.params, run.logger, run.summary, sheet.intake
    pf = None
    if intake.rows:
        progress().phase("preflight")
        pf = await preflight_task(
            settings,
            untraversed(intake.rows),
            _preflight_options(params),
            params.rate_limit_per_s,
            run.settings,
            untraversed(SpillSink(sheet.spill)) if sheet.spill is not None else None,
        )
        run.meter.api_calls.update(pf.api_calls)
        summary.fee_total = money(pf.fee_total)
        summary.preflight = PreflightFigures(
            problems=pf.problems,
            notes=pf.notes,
            name_checks=pf.name_counts,
            cache=pf.cache_counts(),
            rate_limit=pf.limiter.figures() if pf.limiter else None,
        )
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
        required = APPROVAL_REQUIRED if gate.need.required else None
        await _preflight_artifact(run.label, pf, intake.rows, required)
        run.meter.phase("preflight")
        release_freed_memory(len(intake.rows))  # the lookups and quotes behind the pre-flight's figures
    if params.dry_run:
        if summary.report_files is None:
            summary.report_files = await asyncio.to_thread(
                write_validation_report_task, intake, params.report_dir, run.label
            )
        logger.info("dry run %s: nothing sent", run.label)
        ended = run.finish(Outcome.DRY_RUN)
        await publish_run_artifacts(run.label, ended.as_json(), [], run.settings)
        return ended
    if pf is None:
        logger.error("no valid rows: nothing to send")
        return await _refused(run, run.finish(Outcome.INVALID_INPUT))
    if pf.problems and not params.allow_preflight_problems:
        for p in pf.problems:
            logger.error("pre-flight: %s", p)
        return await _refused(run, run.finish(Outcome.PREFLIGHT_FAILED))
    return pf


async def _approval(
    run: PayoutRun, sheet: Sheet, rows: RunRows, pf: Preflight, gate: Gate
) -> PayoutRunSummary | None:
    """Wait for the approvals the gate asks (none: go on, None); anything but enough valid ones ends the run
    (its summary)."""
    if not gate.need.required:
        return None
    engine = gate.engine
    assert engine is not None, "a policy that asks approvals was read from the payops database"
    names_checked = run.params.check_names and no_name_column(sheet.intake) is None
    checks = rows.name_map()
    answer = await _approve(run, sheet.intake.rows, pf, checks, gate, engine, names_checked)
    run.meter.phase("approval")
    await _preflight_artifact(run.label, pf, sheet.intake.rows, _decision_line(answer))
    if not answer.approved:
        run.logger.warning("run %s not approved: nothing sent", run.label)
        return await _not_approved(run, engine, answer.comment, answer.refusal)
    approval = ApprovalRecord(approved=True, comment=answer.comment, approvers=answer.approvers)
    run.summary.approval = await with_decisions(approval, engine)
    return None


@dataclass(frozen=True)
class Ending:
    """How sending and following ended: when the payouts were created and how many were replays, the payouts
    still waiting (``waiting.states``, with the
    poll's rounds and whether it hit the deadline or the settle window), rates, rows a retry claimed."""

    created: SentSpan
    waiting: PollResult
    limiters: list[LimiterStats | None]
    retried: dict[str, str]


@dataclass
class _Tally:
    """Every row's outcome counted: accepted payouts by status, refused items by code, the money moved."""

    by_status: Counter[str | None]
    refused_by_code: Counter[str | None]
    moved: MoneyMoved


def _tally(outcomes: Mapping[int, RowOutcome], facts: Mapping[int, RowFacts]) -> _Tally:
    tally = _Tally(Counter(), Counter(), MoneyMoved())
    for o in outcomes.values():
        if o.submission == "accepted":
            tally.by_status[o.status] += 1
        elif o.submission == "refused":
            tally.refused_by_code[o.error_code] += 1
        if (f := facts.get(o.row)) is not None:
            tally.moved.add(o, f)
    return tally


def _write_ending(summary: PayoutRunSummary, ending: Ending, tally: _Tally) -> None:
    """The summary's figures of the send, the wait and the money: what `ending` and `tally` hold."""
    poll = ending.waiting
    not_final = sorted(poll.states)
    summary.payouts_by_status = {str(k): v for k, v in sorted(tally.by_status.items())}
    summary.refused_items = sum(tally.refused_by_code.values())
    summary.refused_by_code = dict(tally.refused_by_code)
    summary.replayed_payouts = ending.created.replayed
    summary.retried_rows = ending.retried
    summary.awaiting_review = sorted(poll.awaiting_review)
    summary.not_final = not_final
    summary.waiting_statuses = {r: poll.states[r].status for r in not_final}  # tasks.payouts.followup
    summary.deadline_reached = poll.deadline_reached
    summary.settle_window_reached = poll.settle_window_reached
    summary.poll_rounds = poll.rounds
    summary.poll_calls_per_round = poll.calls_per_round
    summary.fee_total = money(tally.moved.fee_total)  # charged: a failed payout's fee was released
    summary.moved = tally.moved.figures()


async def _close(
    run: PayoutRun,
    sheet: Sheet,
    pf: Preflight,
    settings: PaymentsSettings,
    outcomes: Mapping[int, RowOutcome],
    facts: Mapping[int, RowFacts],
    ending: Ending,
) -> PayoutRunSummary:
    """The run's reconciliation, summary, reports and artifacts from every row's outcome (held, or read from
    a spill a window at a time); the run's final summary."""
    params, label, intake, summary = run.params, run.label, sheet.intake, run.summary
    progress().phase("reporting")
    summary.rate_limit = LimiterStats.combine([x for x in ending.limiters if x is not None]).figures()
    summary.reconciliation = await reconcile_at_run_end(
        settings,
        run.settings,
        label,
        refused_references(outcomes.values()),
        params.rate_limit_per_s,
        ending.created.span,
    )
    tally = _tally(outcomes, facts)
    _write_ending(summary, ending, tally)
    no_names = no_name_column(intake) if params.check_names else None
    attention, total = attention_rows(intake.rows, outcomes, pf.names, no_names)
    summary.attention_rows = attention  # typed by the producer (`AttentionRow`), kept as it is made
    summary.attention_total = total
    run.finish(Outcome.COMPLETED)
    await _report(run, sheet, outcomes, facts)
    run.logger.info(
        "run %s done: %s; %d refused by the service",
        label,
        ", ".join(f"{k} {v}" for k, v in sorted(tally.by_status.items())) or "no payouts",
        summary.refused_items,
    )
    return summary


async def _report(
    run: PayoutRun, sheet: Sheet, outcomes: Mapping[int, RowOutcome], facts: Mapping[int, RowFacts]
) -> None:
    """The run's reports (files) and Prefect artifacts from its finished summary."""
    summary, intake = run.summary, sheet.intake
    paths = await asyncio.to_thread(
        write_reports,
        run.params.report_dir,
        run.label,
        intake.columns,
        intake.table,
        outcomes,
        summary.as_json(),
        intake.mapped.get("reference"),  # whatever header the intake mapped to the reference
        facts,
        intake.mapped,  # the columns payops read: the amount's echoed as the typed amount
    )
    summary.report_files = paths
    run.meter.phase("report")
    summary.duration_s = run.meter.elapsed
    await publish_run_artifacts(run.label, summary.as_json(), attention_table(outcomes), run.settings)
    run.logger.info(
        "reports written for %s: %s", run.label, ", ".join(f"{k} {v}" for k, v in (paths or {}).items())
    )


async def _mark_retried_parts(retries: RetryRows | None, label: str, spill: RunRows) -> dict[str, str]:
    """`mark_retried` over a spill's outcomes, a window at a time; the marked rows go back to the spill."""
    retried: dict[str, str] = {}
    if retries is None:
        return retried
    window: dict[int, RowOutcome] = {}
    for o in spill.outcomes():
        window[o.row] = o
        if len(window) >= 5_000:
            retried.update(await mark_retried(retries, label, window))
            spill.record(o for o in window.values() if o.retried_as)
            window = {}
    retried.update(await mark_retried(retries, label, window))
    spill.record(o for o in window.values() if o.retried_as)
    return retried


APPROVAL_REQUIRED = "**Approval required**: nothing is sent until this run is approved."
NO_APPROVAL_KEY = (
    "this run needs approval, and approvals are given through the payops server, which holds the approval "
    "key; this host has none. Nothing was sent. Start `payops serve` for this home (or set PAYOPS_URL to "
    "your payops server) and run the same command again: the approvers then approve it in the console"
)
"""Why a run needing approval ends at once where no approval key is set up (a CLI-only home, a worker
without the key): what to set up, for the person who started it."""


async def _approve(
    run: PayoutRun,
    rows: Sequence[PayoutRow],
    pf: Preflight,
    checks: Mapping[int, NameCheck],
    gate: Gate,
    engine: Engine,
    names_checked: bool,
) -> Answer:
    """The approval phase: what the approvers see goes to the payops database, then the run pauses until
    enough valid signed approvals, a rejection or the deadline. No verify key: not paused at all, nothing
    sent."""
    params, label = run.params, run.label
    try:
        key = await asyncio.to_thread(load_verify_key, run.settings)  # no key: no pause, nothing sent
        audit_key = await asyncio.to_thread(run.settings.audit_key_bytes)
    except (ApprovalKeyMissing, ValueError, OSError) as exc:
        reason = f"{NO_APPROVAL_KEY} ({exc})"
        get_run_logger().error("%s", reason)
        return Answer(False, reason, refusal=Decision(kind="not_approved", reason=reason))
    from prefect.runtime import deployment, flow_run

    run_id = str(flow_run.id)
    subject = Subject.of(
        run_id,
        fingerprint(row_fields(r, payout_reference(r, label)) for r in rows),
        totals_by_currency(rows),
        len(rows),
    )
    start, need = gate.start, gate.need
    ask = Ask(label, subject, need, start, params.approval_timeout_s, params.approval_reminder_s)
    desk = ApprovalDesk(engine, audit_key=audit_key)
    asked = await asyncio.to_thread(desk.requests.get, run_id)
    # A run resumed, or started again, while its request (same rows) waits: it waits on, to the same
    # deadline, without telling the approvers a second time; the decision is read where it waits.
    waiting = asked is not None and asked.state == "waiting" and asked.fingerprint == subject.fingerprint
    if not waiting and (carried := await approved_before(ask, key, desk)) is not None:
        return carried
    figures = currency_figures(pf)
    paid = await asyncio.to_thread(_paid_before, run, rows, engine)
    found = findings(rows, pf.names, names_checked, paid)
    if not waiting:
        await asyncio.to_thread(
            desk.open,
            run_id=run_id,
            label=label,
            start=start,
            need=need,
            policy=gate.policy,
            fingerprint_=subject.fingerprint,
            figures=figures,
            findings_=found,
            rows=request_rows(rows, label, checks),
            timeout_s=params.approval_timeout_s,
            paid=paid,
        )
        emit_needs_approval(label, pf, params.approval_timeout_s)
    progress().phase("approval")
    description = resume_description(ask, figures, found, run.settings)
    if run.settings.approval_wait == "suspend" and deployment.id:  # suspending needs a deployment
        return await wait_suspended(ask, key, desk, description)
    return await ask_approval(ask, key, desk, description)


def _paid_before(run: PayoutRun, rows: Sequence[PayoutRow], engine: Engine) -> PaidBefore:
    """The runs that paid this sheet or its rows in the window (`tasks.payouts.paid_before`), for the
    approvers; each is logged and noted in the run's summary."""
    from payops.store.reconciliation import ReconciliationStore

    try:
        paid = paid_before(
            ReconciliationStore(engine),
            rows,
            run.label,
            run.sheet,
            run.settings.paid_before_days,
            retried=RetryRows(engine).ancestors(run.label),
        )
    except SQLAlchemyError as exc:  # the approvers are told it was not looked up
        unread = f"the payops database could not be read ({type(exc).__name__})"
        paid = PaidBefore(run.label, 0, unread=unread)
        run.logger.error("paid before: %s", paid.lines()[0])
        run.summary.note(f"paid before: {paid.lines()[0]}")
        return paid
    for line in paid.lines():
        run.logger.warning("paid before: %s", line)
        run.summary.note(f"paid before: {line}")
    return paid


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


def _run_id() -> str | None:
    from prefect.runtime import flow_run

    return str(flow_run.id) if flow_run.id else None
