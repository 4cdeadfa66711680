"""Typed run summaries of the flow families other than the payout run (`tasks.payouts.run_summary`): the
outcome, its exit code and the lines a person reads; each on `tasks.runtime.run_summary.RunSummary`.

Each model declares every field its flow writes, in the order the flow writes them (its ``JSON_ORDER``); a key
it does not declare is refused (docs/runs.md, *Other flows' summaries*).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from payops.tasks.runtime.plurals import counted
from payops.tasks.runtime.run_outcomes import Outcome
from payops.tasks.runtime.run_summary import EXIT_OK, RunSummary, SheetRunSummary, in_words, row_error_lines
from pydantic import BaseModel, ConfigDict, Field


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PurchaseRunSummary(SheetRunSummary):
    """``utility-purchases`` (airtime and data)."""

    amount_total: str | None = None
    #: distinct fee quotes asked (one per product and amount)
    quotes: int = 0
    fee_total: str = "-"
    gross_total: str = "-"
    wallet_gross_total: str | None = None
    wallet_available: str | None = None
    notes: list[str] = Field(default_factory=list)
    chunks: int = 0
    purchases: int = 0
    purchases_by_status: dict[str, int] = Field(default_factory=dict)
    refused_items: int = 0
    refused_by_code: dict[str | None, int] = Field(default_factory=dict)
    replayed_purchases: int = 0
    unresolved: list[str] = Field(default_factory=list)
    not_final: list[str] = Field(default_factory=list)
    deadline_reached: bool = False
    poll_rounds: int = 0
    api_calls: dict[str, int] = Field(default_factory=dict)
    phase_durations_s: dict[str, float] = Field(default_factory=dict)
    duration_s: float | int = 0
    report_files: dict[str, str] | None = None

    def lines(self) -> list[str]:
        lines = [f"{self.label}: {self.outcome}"]
        lines.append(f"  rows: {self.rows_total} ({self.rows_valid} valid, {self.rows_invalid} invalid)")
        lines.append(f"  amount: {self.amount_total}   fees: {self.fee_total}   gross: {self.gross_total}")
        if self.purchases_by_status:
            lines.append("  purchases: " + ", ".join(f"{k} {v}" for k, v in self.purchases_by_status.items()))
        if self.refused_items:
            lines += in_words("refused by the service", self.refused_by_code or {None: self.refused_items})
        if self.replayed_purchases:
            lines.append(f"  bought by an earlier run with this label (replayed): {self.replayed_purchases}")
        for ref in self.unresolved:
            lines.append(f"  awaiting the service (do not buy again): {ref}")
        lines += row_error_lines(self.errors, file_level=False)
        return lines + self.closing_lines()


class SettlementAlert(_Part):
    """The settlement policy cannot be paid out: the service's code, the failed run whose retry it refused
    (``retry-failed-settlements``; none for ``settle-now``) and the fix."""

    code: str | None = None
    run_id: str | None = None
    fix: str


class SettlementRunSummary(RunSummary):
    """``retry-failed-settlements`` and ``settle-now``: a run that did not complete exits 1.

    ``settle-now`` writes its one run (``reference`` .. ``currency``, ``deadline_reached``); the retry writes
    its window (``window_since``, ``run_id`` and ``run_reference`` as asked, the counts and the runs)."""

    EXIT_CODES: ClassVar[dict[str, int]] = {Outcome.COMPLETED: EXIT_OK}

    label: str | None = None
    reference: str | None = None
    outcome: Outcome | None = None
    window_since: str | None = None
    run_id: str | None = None
    status: str | None = None
    settlement_outcome: str | None = None
    item_count: int | None = None
    total: str | None = None
    currency: str | None = None
    run_reference: str | None = None
    runs_seen: int = 0
    failed_runs: int = 0
    retried: int = 0
    retried_before: int = 0
    skipped: int = 0
    not_attempted: int = 0
    alert: SettlementAlert | None = None
    retry_outcomes: dict[str, int] = Field(default_factory=dict)
    retries_failed_again: list[str] = Field(default_factory=list)
    retries_not_completed: list[str] = Field(default_factory=list)
    deadline_reached: bool = False
    skipped_reasons: dict[str, str | None] = Field(default_factory=dict)
    #: failed run id → the id of its retry run
    retries: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    api_calls: dict[str, int] = Field(default_factory=dict)
    phase_durations_s: dict[str, float] = Field(default_factory=dict)
    duration_s: float | int = 0
    report_files: dict[str, str] | None = None

    def lines(self) -> list[str]:
        lines = [f"{self.label}: {self.outcome}"]
        if "runs_seen" in self.model_fields_set:
            lines.append(
                f"  runs seen: {self.runs_seen}   failed: {self.failed_runs}   retried now: {self.retried}   "
                f"retried before: {self.retried_before}   skipped: {self.skipped}"
            )
            if self.retry_outcomes:
                lines.append(
                    "  retry outcomes: " + ", ".join(f"{k} {v}" for k, v in self.retry_outcomes.items())
                )
            for run_id in self.retries_failed_again:
                lines.append(f"  retry run {run_id} failed again: reported, not retried again")
            for run_id, reason in self.skipped_reasons.items():
                lines.append(f"  skipped {run_id}: {reason}")
        if self.run_id and "settlement_outcome" in self.model_fields_set:
            lines.append(
                f"  run {self.run_id}: {self.status} {self.settlement_outcome or ''}  "
                f"total {self.total} {self.currency}"
            )
        if self.outcome == Outcome.INCOMPLETE:
            lines.append(
                "  some runs were still running at the poll deadline: run the command again to report them"
            )
        return lines + self.closing_lines()


class GroupTotals(_Part):
    """One value of a breakdown (`tasks.ledger.transactions_report.breakdown`): transactions, and their
    amounts and fees by currency."""

    count: int
    amount: dict[str, str] = Field(default_factory=dict)
    fee: dict[str, str] = Field(default_factory=dict)


class WalletLine(_Part):
    """A wallet account's balance and reserve in one currency (`transactions_report.wallet_rows`)."""

    account: str | None = None
    currency: str | None = None
    balance: str | None = None
    reserved: str | None = None


class LimitLine(_Part):
    """A currency's limit and its use in one period (`transactions_report.limit_rows`)."""

    currency: str | None = None
    period: str
    limit: str | None = None
    in_used: str | None = None
    in_remaining: str | None = None
    out_used: str | None = None
    out_remaining: str | None = None
    per_transaction: str | None = None


class TransactionsReportSummary(RunSummary):
    """``transactions-report``."""

    model_config = ConfigDict(populate_by_name=True)

    label: str | None = None
    outcome: Outcome | None = None
    from_: str | None = Field(None, alias="from")
    to: str | None = None
    #: the filters given (kind, status, settlement_status, reconciliation_status)
    filters: dict[str, str] = Field(default_factory=dict)
    transactions: int = 0
    totals_by_kind_direction: dict[str, dict[str, str]] = Field(default_factory=dict)
    by_kind: dict[str, GroupTotals] = Field(default_factory=dict)
    by_direction: dict[str, GroupTotals] = Field(default_factory=dict)
    by_status: dict[str, GroupTotals] = Field(default_factory=dict)
    by_reconciliation: dict[str, GroupTotals] = Field(default_factory=dict)
    #: references of the transactions whose reconciliation is mismatched
    mismatched: list[str] = Field(default_factory=list)
    wallet: list[WalletLine] = Field(default_factory=list)
    limits: list[LimitLine] = Field(default_factory=list)
    taken_at: str | None = None
    api_calls: dict[str, int] = Field(default_factory=dict)
    report_files: dict[str, str] | None = None
    phase_durations_s: dict[str, float] = Field(default_factory=dict)
    duration_s: float | int = 0

    def lines(self) -> list[str]:
        lines = [f"{self.label}: {self.outcome}"]
        lines.append(f"  window {self.from_} -> {self.to}: {self.transactions} transactions")
        for key, cur in self.totals_by_kind_direction.items():
            lines.append(f"  {key}: " + ", ".join(f"{v} {c}" for c, v in cur.items()))
        if self.mismatched:
            lines.append(f"  mismatched reconciliations: {len(self.mismatched)}")
        return lines + self.closing_lines()


class EventsCatchUpSummary(RunSummary):
    """``events-catch-up``."""

    outcome: Outcome | None = None
    #: the Prefect Variable holding the cursor
    variable: str | None = None
    cursor_before: str | None = None
    cursor_after: str | None = None
    events_read: int = 0
    events_emitted: int = 0
    events_kept_not_forwarded: int = 0
    duplicates_skipped: int = 0
    pages: int = 0
    restarted_without_cursor: bool = False
    oldest_emitted_at: str | None = None
    emitted_by_type: dict[str, int] = Field(default_factory=dict)
    api_calls: dict[str, int] = Field(default_factory=dict)
    duration_s: float | int = 0

    def lines(self) -> list[str]:
        lines = [f"{self.label or 'events catch-up'}: {self.outcome}"]
        lines.append(
            f"  read {self.events_read}, emitted {self.events_emitted}, duplicates skipped "
            f"{self.duplicates_skipped}; cursor {self.cursor_before} -> {self.cursor_after}"
        )
        if self.restarted_without_cursor:
            lines.append("  the saved cursor was too old or unknown: restarted from the first event")
        return lines + self.closing_lines()


class FollowupSummary(RunSummary):
    """``payout-followup``: the waiting payouts of finished runs read again."""

    label: str | None = None
    outcome: Outcome | None = None
    runs_checked: int = 0
    #: run label → payout reference → [status before, status now]
    moved: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    still_waiting: int = 0
    notes: list[str] = Field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [f"follow-up{' of ' + self.label if self.label else ''}: {self.outcome}"]
        lines.append(f"  runs checked: {self.runs_checked}   payouts still waiting: {self.still_waiting}")
        for label, changes in self.moved.items():
            for ref, (before, now) in changes.items():
                lines.append(f"  {label}: payout {ref} {before} -> {now}")
        return lines + self.closing_lines()


class CurrencyClose(_Part):
    """A day close's wallet equation in one currency (`tasks.ledger.daily_close`): the balance and reserve
    now and, against the previous close (none on the first), the change, the movements and what neither
    explains."""

    balance: str | None = None
    reserved: str | None = None
    previous_balance: str | None = None
    previous_reserved: str | None = None
    change: str | None = None
    movements: str | None = None
    unexplained: str | None = None


class DifferenceRow(_Part):
    """A difference a check found (`store.reconciliation.Difference.as_dict`)."""

    kind: str
    reference: str | None = None
    label: str | None = None
    currency: str | None = None
    expected: str | None = None
    actual: str | None = None
    detail: str = ""


class ReconciliationSummary(RunSummary):
    """``reconcile-run`` and ``reconcile-day``.

    A run check writes ``rows`` .. ``wallet_effect``, ``trigger`` and ``checked_at``
    (`tasks.ledger.run_reconciliation`); a day close ``day``, ``from`` .. ``balances``, ``open_items`` and
    ``runs_touched`` (`tasks.ledger.daily_close`); a run with nothing to check only its ``status``
    (``not_a_payops_run``, ``in_progress``)."""

    model_config = ConfigDict(populate_by_name=True)

    label: str | None = None
    outcome: Outcome | None = None
    scope: Literal["run", "day"] = "run"
    day: str | None = None
    status: str | None = None
    from_: str | None = Field(None, alias="from")
    snapshot_at: str | None = None
    transactions: int | None = None
    outside_payops: int = 0
    balances: dict[str, CurrencyClose] = Field(default_factory=dict)
    rows: int = 0
    matched: int = 0
    open: int = 0
    differences: int = 0
    by_kind: dict[str, int] = Field(default_factory=dict)
    wallet_effect: dict[str, str] = Field(default_factory=dict)
    open_items: int = 0
    runs_touched: list[str] = Field(default_factory=list)
    trigger: str | None = None
    checked_at: str | None = None
    check_id: int | None = None
    #: the first 500 differences
    differences_list: list[DifferenceRow] = Field(default_factory=list)
    api_calls: dict[str, int] = Field(default_factory=dict)
    report_files: dict[str, str] | None = None
    phase_durations_s: dict[str, float] = Field(default_factory=dict)
    duration_s: float | int = 0

    def lines(self) -> list[str]:
        what = f"run {self.label}" if self.scope == "run" else f"day {self.day or self.label}"
        lines = [f"reconciliation of {what}: {self.status}"]
        for currency, b in self.balances.items():
            held = f"  {currency}: balance {b.balance}, reserved {b.reserved}"
            if b.change is not None:
                moved = f"movements {b.movements}, unexplained {b.unexplained}"
                lines.append(f"{held}; change {b.change}, {moved}")
            else:  # the first close: nothing to compare with yet
                lines.append(f"{held} (the baseline the next close compares with)")
        if self.scope == "day" and self.transactions is not None:
            lines.append(
                f"  {counted(self.transactions, 'transaction')} since {self.from_ or '?'}; "
                f"{self.outside_payops} outside payops"
            )
        if self.differences:
            lines.append("  differences: " + ", ".join(f"{k} {v}" for k, v in self.by_kind.items()))
        for d in self.differences_list[:20]:
            lines.append(f"    {d.kind}: {d.reference or d.currency} ({d.detail})")
        return lines + self.closing_lines()
