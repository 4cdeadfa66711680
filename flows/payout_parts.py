"""The send and poll phases of every payout run, a part of the sheet at a time: the one path that sends and
follows payouts.

A csv too large to hold (`tasks.intake.streaming.streams`) is read into a spill file (`SpilledRun`). Its run
sends and follows its payouts a part at a time (`PART_ROWS` valid rows: a whole number of batches), so what
the run holds is one part's rows, batches' answers and states, whatever the sheet's length. A sheet held
whole is one part, behind the same row views (`tasks.payouts.held_rows.HeldRows`):

- **send**: per part, its approved payouts are recorded for reconciliation, then its batches go as in any
  run (`tasks.payouts.batching.batch_of` over the same rows: the same references and Idempotency-Keys, so a
  crashed run re-run with its label replays); refused rows and accepted payouts go to the spill;
- **poll**: per part, every accepted payout until it is final or waits for a person (in review, held); then
  those still waiting, of every part together, for the settle window, to the run's one deadline;
- each row's outcome goes to the spill, which the reports read in sheet order.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from payops.connectors.payments import PaymentsSettings
from payops.flows.pipeline import SheetRun, send_parts
from payops.tasks.intake import IntakeResult
from payops.tasks.ledger.run_reconciliation import SentSpan, record_approved_payouts
from payops.tasks.payouts.batching import MAX_BATCH, batch_of
from payops.tasks.payouts.fee_pricing import FeeRange
from payops.tasks.payouts.polling import PayoutState, PollResult, Share, poll_payouts_task
from payops.tasks.payouts.retry_rows import FailureLog
from payops.tasks.payouts.run_summary import PayoutRunSummary
from payops.tasks.payouts.submission import BatchResult, submit_batch_task
from payops.tasks.rows.outcome import RowFacts, RowOutcome
from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.runtime.memory import forget_task_results, release_freed_memory
from payops.tasks.runtime.progress import progress
from payops.tasks.runtime.ratelimit import LimiterStats
from prefect.utilities.annotations import quote as untraversed

if TYPE_CHECKING:
    from payops.tasks.rows.name_check import NameCheck

PART_ROWS = 20_000
"""Valid rows of a spilled sheet sent and followed at a time (a whole number of batches); a sheet held whole
is one part."""
assert PART_ROWS % MAX_BATCH == 0


class RunRows(Protocol):
    """The row views a run is sent, followed and reported from: a spill file's (`SpilledRun`) or a sheet
    held whole (`HeldRows`)."""

    def __len__(self) -> int: ...
    def rows(self, start: int = 0, stop: int | None = None) -> Iterator[PayoutRow]: ...
    def batch_count(self) -> int: ...
    def fees_between(self, first: int, last: int) -> dict[int, FeeRange]: ...
    def put_states(self, states: Iterable[tuple[int, PayoutState]]) -> None: ...
    def state_count(self) -> int: ...
    def states_between(self, first: int, last: int) -> dict[int, PayoutState]: ...
    def states_not_final(self) -> dict[int, PayoutState]: ...
    def forget_states(self) -> None: ...
    def record(self, outcomes: Iterable[RowOutcome]) -> None: ...
    def outcomes(self) -> Iterator[RowOutcome]: ...
    def outcomes_between(self, first: int, last: int) -> dict[int, RowOutcome]: ...
    def name_map(self) -> Mapping[int, NameCheck]: ...
    def outcome_map(self) -> Mapping[int, RowOutcome]: ...
    def fact_map(self) -> Mapping[int, RowFacts]: ...


@dataclass
class PartsRun:
    """What sending and following a spilled run's parts came to (each row's outcome is in the spill)."""

    created: SentSpan
    """When the service created the run's payouts, and how many were replays."""
    part_rows: int = PART_ROWS
    """Valid rows sent and followed at a time."""
    batches: int = 0
    limiters: list[LimiterStats] = field(default_factory=list)
    waiting: PollResult | None = None
    """The last poll: the payouts still waiting for a person (or not final at the deadline), of every part."""
    rounds: int = 0
    calls_per_round: list[int] = field(default_factory=list)
    followed: int = 0
    """Payouts whose part has been followed (final, or waiting for a person)."""
    final_by_status: Counter[str] = field(default_factory=Counter)
    """The followed payouts that reached a final status, by status."""


def batch_said(started: datetime) -> Callable[[int, int, BatchResult], str]:
    """The log line of a batch answered: payouts, accepted (replayed: created before ``started``), refused."""

    def said(done: int, total: int, result: BatchResult) -> str:
        accepted = [i for i in result.items if i.accepted]
        created = SentSpan(started)
        for item in accepted:
            created.add(accepted_state(item).created_at)
        return (
            f"batch {done}/{total} sent: {len(result.items)} payouts, {len(accepted)} accepted "
            f"({created.replayed} replayed), {len(result.items) - len(accepted)} refused"
        )

    return said


def parts(spill: RunRows, size: int) -> Iterator[tuple[int, int]]:
    """``[start, stop)`` positions of each part's valid rows, ``size`` rows a part."""
    for start in range(0, len(spill), size):
        yield start, min(len(spill), start + size)


def accepted_state(item: Any) -> PayoutState:
    """The state of a payout as its batch's answer gives it."""
    created = datetime.fromisoformat(item.created_at) if item.created_at else None
    return PayoutState(item.reference, item.status or "accepted", fee=item.fee, created_at=created)


def submitted_outcome(item: Any, batch: str, state: PayoutState | None = None) -> RowOutcome:
    """A sent row's outcome from its batch's answer and, when accepted, its payout's last known state."""
    o = RowOutcome(item.row, reference=item.reference, batch=batch)
    if not item.accepted:
        o.submission, o.error_code, o.error_message = "refused", item.code, item.message
        return o
    o.submission = "accepted"
    o.status = state.status if state else item.status
    o.fee = (state.fee if state and state.fee else None) or item.fee
    o.failure_reason = state.failure_reason if state else None
    o.completed_at = state.completed_at if state else None
    return o


async def send_parts_of(
    run: SheetRun[PayoutRunSummary],
    spill: RunRows,
    settings: PaymentsSettings,
    failures: FailureLog,
    said: Callable[[int, int, BatchResult], str],
    part_rows: int | None = None,
) -> PartsRun:
    """Every batch, a part of ``part_rows`` valid rows at a time (None: `PART_ROWS`); refused rows' outcomes
    and accepted payouts' states to the spill."""
    params, label = run.params, run.label
    part_rows = part_rows or PART_ROWS
    done = PartsRun(SentSpan(run.started_wall), part_rows, batches=spill.batch_count())
    run.summary.batches = done.batches
    run.summary.parts = -(-len(spill) // part_rows)
    for number, (start, stop) in enumerate(parts(spill, part_rows)):
        rows = list(spill.rows(start, stop))
        first_batch = start // MAX_BATCH
        await record_approved_payouts(
            run.settings,
            label,
            rows,
            spill.fees_between(rows[0].row, rows[-1].row),  # the pre-flight's, spilled (`SpillSink`)
            first=number == 0,
            sheet=run.sheet,
            name=run.shown_name,
        )

        async def send_one(k: int, rows: list = rows, first_batch: int = first_batch) -> BatchResult:
            batch = batch_of(rows[k * MAX_BATCH : (k + 1) * MAX_BATCH], label, first_batch + k)
            return await submit_batch_task(settings, untraversed(batch), params.rate_limit_per_s)

        count = -(-len(rows) // MAX_BATCH)
        results = await send_parts(
            count,
            send_one,
            max_concurrent=params.max_concurrent_batches,
            said=said,
            logger=run.logger,
            sent_before=first_batch,
            total=done.batches,
        )
        forget_task_results(results)
        await failures.refused(results)
        failures.follow({})  # the poll tells it each part's payouts again (`_poll`)
        results.reverse()
        while results:  # each batch's answer let go once recorded: one copy of each row's outcome at a time
            r = results.pop()
            run.meter.api_calls.update(r.api_calls)
            if r.limiter is not None:
                done.limiters.append(r.limiter)
            states: list[tuple[int, PayoutState]] = []
            for item in r.items:
                if item.accepted:
                    state = accepted_state(item)
                    states.append((item.row, state))
                    done.created.add(state.created_at)
            spill.put_states(states)
            spill.record(submitted_outcome(item, r.reference) for item in r.items)
        done.limiters = [LimiterStats.combine(done.limiters)]  # one figure, not one per batch
        del rows, results
        release_freed_memory(part_rows)
    run.meter.phase("submit")
    return done


async def poll_parts_of(
    run: SheetRun[PayoutRunSummary],
    spill: RunRows,
    settings: PaymentsSettings,
    failures: FailureLog,
    done: PartsRun,
) -> PartsRun:
    """Each part's payouts until final or waiting for a person; then every one still waiting for the
    settle window. Each row's outcome goes to the spill as its part is done."""
    params = run.params
    deadline = time.time() + params.poll_deadline_s
    progress().phase("polling")
    total = spill.state_count()
    for start, stop in parts(spill, done.part_rows):
        rows = list(spill.rows(start, stop))
        if not rows:
            continue
        followed = spill.states_between(rows[0].row, rows[-1].row)
        del rows
        share = Share(done.followed, total)
        poll = await _poll(run, settings, followed, deadline, 0.0, failures, share)
        _absorb(spill, followed, poll, done)
        if poll.deadline_reached:
            break
    waiting = spill.states_not_final()
    share = Share(total - len(waiting), total)
    done.waiting = await _poll(run, settings, waiting, deadline, params.settle_window_s, failures, share)
    _absorb(spill, waiting, done.waiting, done)
    run.meter.phase("poll")
    _say_polled(run, done)
    return done


def _say_polled(run: SheetRun[PayoutRunSummary], done: PartsRun) -> None:
    """The poll's log line: rounds, payouts by status, and why it ended while some still wait."""
    poll = done.waiting or PollResult({})
    statuses = done.final_by_status + Counter(s.status for s in poll.states.values() if not s.final)
    run.logger.info(
        "polling done after %d round(s): %s%s",
        done.rounds,
        ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "no payouts",
        f"; {sum(1 for s in poll.states.values() if not s.final)} not final at the deadline"
        if poll.deadline_reached
        else f"; {len(poll.awaiting_review)} awaiting review after the settle window (followed later)"
        if poll.settle_window_reached
        else "",
    )


async def _poll(
    run: SheetRun[PayoutRunSummary],
    settings: PaymentsSettings,
    followed: dict[int, PayoutState],
    deadline: float,
    settle_window_s: float,
    failures: FailureLog,
    share: Share,
) -> PollResult:
    states = {s.reference: s for s in followed.values()}
    if not states:
        return PollResult(states)
    failures.follow({s.reference: row for row, s in followed.items()})
    poll = await poll_payouts_task(
        settings,
        untraversed(states),
        deadline,
        run.params.rate_limit_per_s,
        run.label,
        settle_window_s,
        untraversed(failures.failed),
        share,
    )
    run.meter.api_calls.update(poll.api_calls)
    return poll


def _absorb(spill: RunRows, followed: dict[int, PayoutState], poll: PollResult, done: PartsRun) -> None:
    """A poll's states and outcomes into the spill; its rounds and rate into the run's."""
    by_reference = {s.reference: row for row, s in followed.items()}
    states = [(by_reference[ref], s) for ref, s in poll.states.items()]
    spill.put_states(states)
    done.final_by_status.update(s.status for _, s in states if s.final)
    known = spill.outcomes_between(min(followed), max(followed)) if followed else {}
    outcomes = []
    for row, s in states:
        o = known.get(row) or RowOutcome(row, reference=s.reference, submission="accepted")
        o.status, o.fee = s.status, s.fee or o.fee
        o.failure_reason, o.completed_at = s.failure_reason, s.completed_at
        outcomes.append(o)
    spill.record(outcomes)
    done.followed += len(followed)
    done.rounds += poll.rounds
    done.calls_per_round += poll.calls_per_round
    if poll.limiter is not None:
        done.limiters.append(poll.limiter)


def invalid_outcomes(intake: IntakeResult) -> list[RowOutcome]:
    """The invalid rows' outcomes (their errors, by row), as every run reports them."""
    out: dict[int, RowOutcome] = {}
    for e in intake.errors:
        o = out.setdefault(e.row, RowOutcome(e.row, submission="invalid", error_code="invalid_input"))
        msg = f"{e.column}: {e.message}"
        o.error_message = msg if not o.error_message else f"{o.error_message}; {msg}"
    return list(out.values())


__all__ = [
    "PART_ROWS",
    "PartsRun",
    "RunRows",
    "accepted_state",
    "batch_said",
    "invalid_outcomes",
    "poll_parts_of",
    "send_parts_of",
    "submitted_outcome",
]
