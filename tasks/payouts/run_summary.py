"""The payout run's typed summary (`PayoutRunSummary`, docs/runs.md *The run summary*), filled phase by phase
by the flow, and `payops check`'s (`SheetCheckSummary`); every entry point prints this one model's JSON."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, ClassVar, Literal

from payops.tasks.intake.columns import currency_note
from payops.tasks.reports.attention import AttentionRow
from payops.tasks.reports.money_moved import MovedFigures, moved_lines
from payops.tasks.runtime.plurals import counted
from payops.tasks.runtime.ratelimit import RateLimitFigures
from payops.tasks.runtime.run_outcomes import Outcome
from payops.tasks.runtime.run_summary import (
    EXIT_OK,
    RowProblem,
    RunSummary,
    SheetRunSummary,
    in_words,
    row_error_lines,
)
from payops.tasks.wire.money import money
from pydantic import BaseModel, ConfigDict, Field


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PreflightFigures(_Part):
    """The pre-flight's findings: ``problems`` (any refuses the run), notes, the payee-name verdicts
    counted, the lookups and quotes (cached, fresh, failed) and its request rate."""

    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    name_checks: dict[str, int] = Field(default_factory=dict)
    cache: dict[str, dict[str, int]] = Field(default_factory=dict)
    rate_limit: RateLimitFigures | None = None


class ApproverDecision(_Part):
    """One approver's decision on the run (`tasks.approval.run_approvals.decisions_of`)."""

    by: str
    decision: Literal["approved", "rejected"]
    comment: str = ""
    at: str


class ApprovalRecord(_Part):
    """What the approval phase decided: approved or not, the comment, who approved, each decision."""

    approved: bool
    comment: str = ""
    approvers: list[str] = Field(default_factory=list)
    decisions: list[ApproverDecision] = Field(default_factory=list)


class RunReconciliationFigures(_Part):
    """The check made when the run ended (`tasks.ledger.run_reconciliation`): its status and counts, or why
    it failed (``error``: it is re-run later)."""

    status: str
    rows: int = 0
    matched: int = 0
    open: int = 0
    differences: int = 0
    by_kind: dict[str, int] = Field(default_factory=dict)
    wallet_effect: dict[str, str] = Field(default_factory=dict)
    trigger: str | None = None
    checked_at: str | None = None
    error: str | None = None


class EarlierRun(_Part):
    """A run that paid this sheet or its rows lately (`tasks.payouts.paid_before.EarlierRun`), and ``said``:
    the sentence a person reads."""

    label: str
    name: str
    sent_at: str
    rows: int
    matched: int
    same_sheet: bool
    same_label: bool
    paid_again: int
    said: str


class FollowUp(_Part):
    """One `payout-followup` pass that moved payouts: when, and each payout's ``[from, to]`` status."""

    at: str
    moved: dict[str, list[str]] = Field(default_factory=dict)


class Decision(BaseModel):
    """Why a run that needed approval sent nothing: rejected by a person, or no valid approval."""

    kind: Literal["rejected", "not_approved"]
    by: str | None = None
    reason: str = ""


class PayoutRunSummary(SheetRunSummary):
    """``payout-spreadsheet``: its fields in the order the run writes them (docs/runs.md)."""

    JSON_AS_IS: ClassVar[frozenset[str]] = frozenset({"attention_rows"})

    batches: int = 0
    payouts_by_status: dict[str, int] = Field(default_factory=dict)
    amount_total: str = "0.00"
    fee_total: str = "0.00"
    #: what the run moved, by currency (`tasks.reports.money_moved`): paid, not paid, fees charged
    moved: dict[str, MovedFigures] = Field(default_factory=dict)
    ignored_columns: list[str] = Field(default_factory=list)
    column_map: str | None = None
    currency: str | None = None
    currency_header: str | None = None
    notes: list[str] = Field(default_factory=list)
    paid_before: list[EarlierRun] = Field(default_factory=list)
    paid_twice_rows: int = 0
    preflight: PreflightFigures | None = None
    approvals_required: int = 0
    started_by: str | None = None
    approval: ApprovalRecord | None = None
    refused_items: int = 0
    refused_by_code: dict[str | None, int] = Field(default_factory=dict)
    parts: int | None = None
    replayed_payouts: int = 0
    retried_rows: dict[str, str] = Field(default_factory=dict)
    awaiting_review: list[str] = Field(default_factory=list)
    not_final: list[str] = Field(default_factory=list)
    waiting_statuses: dict[str, str | None] = Field(default_factory=dict)
    deadline_reached: bool = False
    settle_window_reached: bool = False
    poll_rounds: int = 0
    poll_calls_per_round: list[int] = Field(default_factory=list)
    attention_rows: list[AttentionRow] = Field(default_factory=list)
    attention_total: int = 0
    reconciliation: RunReconciliationFigures | None = None
    rate_limit: RateLimitFigures | None = None
    api_calls: dict[str, int] = Field(default_factory=dict)
    phase_durations_s: dict[str, float] = Field(default_factory=dict)
    duration_s: float | int = 0
    report_files: dict[str, str] | None = None
    followed_up: list[FollowUp] = Field(default_factory=list)
    #: why a run that needed approval sent nothing; not a JSON field (the state name and message say it)
    decision: Decision | None = Field(None, exclude=True)

    @classmethod
    def head(
        cls,
        source: str,
        label: str | None,
        *,
        errors: Sequence[RowProblem | dict[str, Any]] = (),
        outcome: Outcome = Outcome.COMPLETED,
    ) -> PayoutRunSummary:
        """The fields every payout summary starts with, whatever the entry point (the flow, `payops check`,
        the CLI's refusal of an unsafe file): no label (None or empty, as the run form leaves it) is
        ``null``; rows, batches and money zero until the sheet is read."""
        return cls(
            label=label or None,
            source=source,
            outcome=outcome,
            rows_total=0,
            rows_valid=0,
            rows_invalid=0,
            errors=[RowProblem.model_validate(e) for e in errors],
            warnings=[],
            batches=0,
            payouts_by_status={},
            amount_total=money(Decimal(0)),
            fee_total=money(Decimal(0)),
        )

    def lines(self) -> list[str]:
        lines = [
            f"run {self.label or self.source}: {self.outcome}",
            f"  rows: {self.rows_total} ({self.rows_valid} valid, {self.rows_invalid} invalid)   "
            f"batches: {self.batches}",
        ]
        if self.payouts_by_status:
            lines.append("  payouts: " + ", ".join(f"{k} {v}" for k, v in self.payouts_by_status.items()))
        failed = self.failed_by_code()
        if failed:
            lines += in_words("failed", failed)
        if self.refused_items:
            lines += in_words("refused by the service", self.refused_by_code or {None: self.refused_items})
        if self.replayed_payouts:
            lines.append(
                f"  already sent by an earlier run with this label (replayed): {self.replayed_payouts}"
            )
        if self.awaiting_review:
            lines.append(
                f"  awaiting review (in_review/held): {len(self.awaiting_review)}; followed after the run: "
                f"payops payouts followup {self.label}"
            )
        if self.not_final and self.deadline_reached:
            lines.append(f"  not final at the poll deadline: {len(self.not_final)}")
        if self.moved:
            lines.append(f"  sheet total: {self.amount_total}   time: {self.duration_s}s")
            lines += [f"  {line}" for line in moved_lines({c: m.model_dump() for c, m in self.moved.items()})]
        else:
            lines.append(f"  amount: {self.amount_total}   fees: {self.fee_total}   time: {self.duration_s}s")
        lines += self.column_lines()
        lines += row_error_lines(self.errors, file_level=True)
        preflight = self.preflight or PreflightFigures()
        for kind, c in preflight.cache.items():
            lines.append(
                f"  {kind.replace('_', ' ')}: {c['cached']} cached, {c['fresh']} fresh, {c['failed']} failed"
            )
        rate = self.rate_limit
        if rate is not None and (rate.rate_reached_per_s or rate.throttled_429):
            lines.append(
                f"  request rate: reached {rate.rate_reached_per_s}/s, "
                f"429s: {rate.throttled_429} of {rate.acquires} requests"
            )
        for p in preflight.problems + preflight.notes:
            lines.append(f"  pre-flight: {p}")
        return lines + self.closing_lines()

    def failed_by_code(self) -> dict[str | None, int]:
        """The failed payouts listed among the rows needing a person, counted by code."""
        counts: dict[str | None, int] = {}
        for a in self.attention_rows:
            if a["kind"] == "failed":
                counts[a.get("code")] = counts.get(a.get("code"), 0) + 1
        return counts

    def column_lines(self) -> list[str]:
        """The sheet's currency and where it came from, the explicit mapping if any, and the sheet's headers
        that pay nothing (kept in the reports)."""
        lines = []
        if self.currency:
            lines.append(f"  {currency_note(self.currency, self.currency_header)}")
        if self.column_map:
            lines.append(f"  column mapping: {self.column_map}")
        if self.ignored_columns:
            lines.append("  ignored columns: " + ", ".join(self.ignored_columns))
        return lines


class SheetCheckSummary(PayoutRunSummary):
    """``payops check``: the payout intake alone; outcome ``valid`` or ``invalid_input``."""

    EXIT_CODES: ClassVar[dict[str, int]] = {**RunSummary.EXIT_CODES, Outcome.VALID: EXIT_OK}

    def lines(self) -> list[str]:
        return [
            f"sheet {self.label or self.source}: {self.outcome}",
            f"  rows: {self.rows_total} ({self.rows_valid} valid, {self.rows_invalid} invalid)   "
            f"amount: {self.amount_total}   time: {self.duration_s}s",
            *self.column_lines(),
            *self.paid_before_lines(),
            *row_error_lines(self.errors, file_level=True),
            *self.closing_lines(),
        ]

    def paid_before_lines(self) -> list[str]:
        """The runs that sent this sheet or its rows lately (``paid_before``, each with ``said``, and
        ``paid_twice_rows``: tasks.payouts.paid_before), in words."""
        lines = [f"  paid before: {e.said}" for e in self.paid_before]
        if self.paid_twice_rows:
            lines.append(
                f"  paying it would pay {counted(self.paid_twice_rows, 'row')} a second time: the approver "
                "must acknowledge it (paid_before)"
            )
        return lines
