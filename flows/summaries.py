"""Typed run summaries, one per flow family: the outcome, its exit code and the lines a person reads.

A flow's JSON summary (the ``--json`` output, the report's JSON; its fields in docs/runs.md) is read into the
family's model; the fields the lines and exit codes use are typed, the other documented fields are kept as
written (``extra="allow"``), so ``--json`` prints the flow's summary unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from payops.connectors.payments.failure_words import failure_words
from payops.tasks.reports.money_moved import moved_lines
from payops.tasks.runtime.plurals import counted
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

EXIT_OK, EXIT_ERROR, EXIT_INVALID, EXIT_NOT_APPROVED = 0, 1, 2, 3


class RunSummary(BaseModel):
    """What every run reports: its label, outcome, notes and report files."""

    model_config = ConfigDict(extra="allow")

    #: outcome → exit code; any other outcome exits 1.
    EXIT_CODES: ClassVar[dict[str, int]] = {
        "completed": EXIT_OK,
        "dry_run": EXIT_OK,
        "invalid_input": EXIT_INVALID,
        "preflight_failed": EXIT_INVALID,
        "not_approved": EXIT_NOT_APPROVED,
    }

    label: str | None = None
    outcome: str | None = None
    notes: list[str] = Field(default_factory=list)
    report_files: dict[str, Any] | None = None

    #: the order the flow wrote its keys in: ``as_json`` keeps it, so ``--json`` stays byte-compatible
    _written: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_key_order(cls, data: Any, handler: Any) -> Any:
        model = handler(data)
        if isinstance(data, Mapping) and isinstance(model, RunSummary):
            model._written = [str(k) for k in data]
        return model

    def __getitem__(self, key: str) -> Any:
        """A documented JSON field by name (``summary["outcome"]``), as ``--json`` prints it."""
        return self.as_json()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_json().get(key, default)

    def as_json(self) -> dict[str, Any]:
        """The documented JSON fields (docs/runs.md), in the order the flow wrote them."""
        dumped = self.model_dump(by_alias=True, exclude_unset=True)
        order = [k for k in self._written if k in dumped]
        return {k: dumped[k] for k in [*order, *(k for k in dumped if k not in order)]}

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this outcome."""
        return self.EXIT_CODES.get(self.outcome or "", EXIT_ERROR)

    def lines(self) -> list[str]:
        """The lines a person reads at the end of the run."""
        return [f"{self.label}: {self.outcome}", *self.closing_lines()]

    def closing_lines(self) -> list[str]:
        """The lines every summary ends with: notes, then the report files written."""
        lines = [f"  note: {note}" for note in self.notes]
        lines += [f"  report {kind}: {path}" for kind, path in (self.report_files or {}).items()]
        return lines

    def text(self) -> str:
        """:meth:`lines` as one text."""
        return "\n".join(self.lines())


def _row_errors(errors: list[dict[str, Any]], *, file_level: bool) -> list[str]:
    lines = []
    for e in errors[:20]:
        where = f"row {e['row']}, column {e['column']}"
        if file_level and e.get("row") is None:
            where = "file"
        lines.append(f"  {where}: {e['message']}")
    if len(errors) > 20:
        lines.append(f"  ... and {len(errors) - 20} more errors (see the validation report)")
    return lines


def _in_words(title: str, counts: Mapping[Any, int]) -> list[str]:
    """``title: n``, then one line per code: how many, what happened and the next step, in words (the codes
    stay in the JSON summary)."""
    lines = [f"  {title}: {sum(counts.values())}"]
    for code, n in sorted(counts.items(), key=lambda item: -item[1]):
        words, next_step = failure_words(None if code is None else str(code))
        lines.append(f"    {n} × {words} Next: {next_step}")
    return lines


def _failed_by_code(attention: Any) -> dict[str | None, int]:
    """The failed payouts listed among a summary's rows needing a person, counted by code."""
    counts: dict[str | None, int] = {}
    for a in attention if isinstance(attention, list) else []:
        if isinstance(a, dict) and a.get("kind") == "failed":
            counts[a.get("code")] = counts.get(a.get("code"), 0) + 1
    return counts


class Decision(BaseModel):
    """Why a run that needed approval sent nothing: rejected by a person, or no valid approval."""

    kind: Literal["rejected", "not_approved"]
    by: str | None = None
    reason: str = ""


class PayoutRunSummary(RunSummary):
    """``payout-spreadsheet``."""

    source: str | None = None
    rows_total: int = 0
    rows_valid: int = 0
    rows_invalid: int = 0
    batches: int = 0
    payouts_by_status: dict[str, int] = Field(default_factory=dict)
    refused_items: int = 0
    refused_by_code: dict[Any, int] = Field(default_factory=dict)
    replayed_payouts: int = 0
    awaiting_review: list[str] = Field(default_factory=list)
    not_final: list[str] = Field(default_factory=list)
    deadline_reached: bool = False
    amount_total: str = "0.00"
    fee_total: str = "0.00"
    #: what the run moved, by currency (`tasks.reports.money_moved`): paid, not paid, fees charged
    moved: dict[str, dict[str, Any]] = Field(default_factory=dict)
    duration_s: float | int = 0
    errors: list[dict[str, Any]] = Field(default_factory=list)
    preflight: dict[str, Any] | None = None
    rate_limit: dict[str, Any] | None = None
    ignored_columns: list[str] = Field(default_factory=list)
    #: why a run that needed approval sent nothing; not a JSON field (the state name and message say it)
    decision: Decision | None = Field(None, exclude=True)

    def lines(self) -> list[str]:
        lines = [
            f"run {self.label or self.source}: {self.outcome}",
            f"  rows: {self.rows_total} ({self.rows_valid} valid, {self.rows_invalid} invalid)   "
            f"batches: {self.batches}",
        ]
        if self.payouts_by_status:
            lines.append("  payouts: " + ", ".join(f"{k} {v}" for k, v in self.payouts_by_status.items()))
        failed = _failed_by_code((self.model_extra or {}).get("attention_rows"))
        if failed:
            lines += _in_words("failed", failed)
        if self.refused_items:
            lines += _in_words("refused by the service", self.refused_by_code or {None: self.refused_items})
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
            lines += [f"  {line}" for line in moved_lines(self.moved)]
        else:
            lines.append(f"  amount: {self.amount_total}   fees: {self.fee_total}   time: {self.duration_s}s")
        lines += self.column_lines()
        lines += _row_errors(self.errors, file_level=True)
        preflight = self.preflight or {}
        for kind, c in (preflight.get("cache") or {}).items():
            lines.append(
                f"  {kind.replace('_', ' ')}: {c['cached']} cached, {c['fresh']} fresh, {c['failed']} failed"
            )
        rate = self.rate_limit or {}
        if rate.get("rate_reached_per_s") or rate.get("throttled_429"):
            lines.append(
                f"  request rate: reached {rate.get('rate_reached_per_s')}/s, "
                f"429s: {rate.get('throttled_429', 0)} of {rate.get('acquires', 0)} requests"
            )
        for p in preflight.get("problems", []) + preflight.get("notes", []):
            lines.append(f"  pre-flight: {p}")
        lines += [f"  note: {note}" for note in self.notes]
        for kind, path in (self.report_files or {}).items():
            lines.append(f"  report {kind}: {path}")
        return lines

    def column_lines(self) -> list[str]:
        """The sheet's currency and where it came from, the explicit mapping if any, and the sheet's headers
        that pay nothing (kept in the reports)."""
        from payops.tasks.intake.columns import currency_note

        lines = []
        extra = self.model_extra or {}
        if extra.get("currency"):
            lines.append(f"  {currency_note(extra['currency'], extra.get('currency_header'))}")
        mapping = extra.get("column_map")
        if mapping:
            lines.append(f"  column mapping: {mapping}")
        if self.ignored_columns:
            lines.append("  ignored columns: " + ", ".join(self.ignored_columns))
        return lines


class SheetCheckSummary(PayoutRunSummary):
    """``payops check``: the payout intake alone; outcome ``valid`` or ``invalid_input``."""

    EXIT_CODES: ClassVar[dict[str, int]] = {**RunSummary.EXIT_CODES, "valid": EXIT_OK}

    def lines(self) -> list[str]:
        return [
            f"sheet {self.label or self.source}: {self.outcome}",
            f"  rows: {self.rows_total} ({self.rows_valid} valid, {self.rows_invalid} invalid)   "
            f"amount: {self.amount_total}   time: {self.duration_s}s",
            *self.column_lines(),
            *self.paid_before_lines(),
            *_row_errors(self.errors, file_level=True),
            *self.closing_lines(),
        ]

    def paid_before_lines(self) -> list[str]:
        """The runs that sent this sheet or its rows lately (written keys ``paid_before``, each with
        ``said``, and ``paid_twice_rows``: tasks.payouts.paid_before), in words."""
        extra = self.model_extra or {}
        lines = [f"  paid before: {e['said']}" for e in extra.get("paid_before") or []]
        if twice := int(extra.get("paid_twice_rows") or 0):
            lines.append(
                f"  paying it would pay {counted(twice, 'row')} a second time: the approver must acknowledge "
                "it (paid_before)"
            )
        return lines


class PurchaseRunSummary(RunSummary):
    """``utility-purchases`` (airtime and data)."""

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
    errors: list[dict[str, Any]] = Field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [f"{self.label}: {self.outcome}"]
        lines.append(f"  rows: {self.rows_total} ({self.rows_valid} valid, {self.rows_invalid} invalid)")
        lines.append(f"  amount: {self.amount_total}   fees: {self.fee_total}   gross: {self.gross_total}")
        if self.purchases_by_status:
            lines.append("  purchases: " + ", ".join(f"{k} {v}" for k, v in self.purchases_by_status.items()))
        if self.refused_items:
            lines += _in_words("refused by the service", self.refused_by_code or {None: self.refused_items})
        if self.replayed_purchases:
            lines.append(f"  bought by an earlier run with this label (replayed): {self.replayed_purchases}")
        for ref in self.unresolved:
            lines.append(f"  awaiting the service (do not buy again): {ref}")
        lines += _row_errors(self.errors, file_level=False)
        return lines + self.closing_lines()


class SettlementRunSummary(RunSummary):
    """``retry-failed-settlements`` and ``settle-now``: a run that did not complete exits 1."""

    EXIT_CODES: ClassVar[dict[str, int]] = {"completed": EXIT_OK}

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
