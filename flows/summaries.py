"""Typed run summaries of the flow families other than the payout run (`tasks.payouts.run_summary`): the
outcome, its exit code and the lines a person reads; each on `tasks.runtime.run_summary.RunSummary`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from payops.tasks.runtime.plurals import counted
from payops.tasks.runtime.run_outcomes import Outcome
from payops.tasks.runtime.run_summary import EXIT_OK, RowProblem, RunSummary, in_words, row_error_lines
from pydantic import ConfigDict, Field


class PurchaseRunSummary(RunSummary):
    """``utility-purchases`` (airtime and data)."""

    model_config = ConfigDict(extra="allow")  # the fields it writes beyond these are not typed yet

    rows_total: int = 0
    rows_valid: int = 0
    rows_invalid: int = 0
    amount_total: str | None = None
    fee_total: str = "-"
    gross_total: str = "-"
    purchases_by_status: dict[str, int] = Field(default_factory=dict)
    refused_items: int = 0
    refused_by_code: dict[Any, int] = Field(default_factory=dict)
    replayed_purchases: int = 0
    unresolved: list[str] = Field(default_factory=list)
    errors: list[RowProblem] = Field(default_factory=list)

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


class SettlementRunSummary(RunSummary):
    """``retry-failed-settlements`` and ``settle-now``: a run that did not complete exits 1."""

    model_config = ConfigDict(extra="allow")  # the fields it writes beyond these are not typed yet

    EXIT_CODES: ClassVar[dict[str, int]] = {Outcome.COMPLETED: EXIT_OK}

    runs_seen: int = 0
    failed_runs: int = 0
    retried: int = 0
    retried_before: int = 0
    skipped: int = 0
    retry_outcomes: dict[str, int] = Field(default_factory=dict)
    retries_failed_again: list[str] = Field(default_factory=list)
    skipped_reasons: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = None
    settlement_outcome: str | None = None

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
        extra = self.model_extra or {}
        if self.run_id and "settlement_outcome" in self.model_fields_set:
            lines.append(
                f"  run {self.run_id}: {extra.get('status')} {self.settlement_outcome or ''}  "
                f"total {extra.get('total')} {extra.get('currency')}"
            )
        if self.outcome == "incomplete":
            lines.append(
                "  some runs were still running at the poll deadline: run the command again to report them"
            )
        return lines + self.closing_lines()


class TransactionsReportSummary(RunSummary):
    """``transactions-report``."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    from_: Any = Field(None, alias="from")
    to: Any = None
    transactions: int = 0
    totals_by_kind_direction: dict[str, dict[str, Any]] = Field(default_factory=dict)
    mismatched: list[Any] = Field(default_factory=list)

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

    model_config = ConfigDict(extra="allow")  # the fields it writes beyond these are not typed yet

    events_read: int = 0
    events_emitted: int = 0
    duplicates_skipped: int = 0
    cursor_before: Any = None
    cursor_after: Any = None
    restarted_without_cursor: bool = False

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

    model_config = ConfigDict(extra="allow")  # the fields it writes beyond these are not typed yet

    runs_checked: int = 0
    moved: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    still_waiting: int = 0

    def lines(self) -> list[str]:
        lines = [f"follow-up{' of ' + self.label if self.label else ''}: {self.outcome}"]
        lines.append(f"  runs checked: {self.runs_checked}   payouts still waiting: {self.still_waiting}")
        for label, changes in self.moved.items():
            for ref, (before, now) in changes.items():
                lines.append(f"  {label}: payout {ref} {before} -> {now}")
        return lines + self.closing_lines()


class ReconciliationSummary(RunSummary):
    """``reconcile-run`` and ``reconcile-day``."""

    model_config = ConfigDict(extra="allow")  # the fields it writes beyond these are not typed yet

    scope: str = "run"
    status: str | None = None
    differences: int = 0
    by_kind: dict[str, int] = Field(default_factory=dict)

    def lines(self) -> list[str]:
        what = f"run {self.label}" if self.scope == "run" else f"day {getattr(self, 'day', self.label)}"
        lines = [f"reconciliation of {what}: {self.status}"]
        balances = getattr(self, "balances", None) or {}
        for currency, b in balances.items():
            held = f"  {currency}: balance {b['balance']}, reserved {b['reserved']}"
            if b.get("change") is not None:
                moved = f"movements {b['movements']}, unexplained {b['unexplained']}"
                lines.append(f"{held}; change {b['change']}, {moved}")
            else:  # the first close: nothing to compare with yet
                lines.append(f"{held} (the baseline the next close compares with)")
        transactions = getattr(self, "transactions", None)
        if self.scope == "day" and transactions is not None:
            outside = getattr(self, "outside_payops", 0) or 0
            lines.append(
                f"  {counted(int(transactions), 'transaction')} since {getattr(self, 'from', '?')}; "
                f"{outside} outside payops"
            )
        if self.differences:
            lines.append("  differences: " + ", ".join(f"{k} {v}" for k, v in self.by_kind.items()))
        for d in (getattr(self, "differences_list", None) or [])[:20]:
            lines.append(f"    {d['kind']}: {d.get('reference') or d.get('currency')} ({d.get('detail')})")
        return lines + self.closing_lines()
