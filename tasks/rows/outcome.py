"""What happened to one sheet row (`RowOutcome`), what the run knows of it besides (`RowFacts`), and the
rules on an outcome every surface shares: the kind of attention it needs, whether a retry pays it again."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from payops.connectors.payments.models import PAYOUT_AWAITING_REVIEW_STATUSES, PAYOUT_FAILED_STATUSES
from payops.tasks.rows.name_check import NameCheck
from payops.tasks.rows.payout_row import PayoutRow

#: The kinds a retry pays again (the resubmit sheet's rows).
RETRY_KINDS = frozenset({"failed", "refused"})


def outcome_kind(submission: str | None, status: str | None) -> str | None:
    """The kind of attention a row's outcome needs (``None``: none): from its submission (``invalid``,
    ``refused``, ``accepted``, ``not sent``) and its payout status."""
    if submission == "invalid":
        return "invalid"
    if submission == "refused":
        return "refused"
    if status in PAYOUT_FAILED_STATUSES:
        return "failed"
    if status in PAYOUT_AWAITING_REVIEW_STATUSES:
        return "awaiting_review"
    return None


def needs_retry(submission: str | None, status: str | None) -> bool:
    """Whether a retry pays the row again (failed or refused)."""
    return outcome_kind(submission, status) in RETRY_KINDS


@dataclass(slots=True)
class RowOutcome:
    """What happened to one sheet row."""

    row: int
    reference: str | None = None
    batch: str | None = None
    submission: str = "not sent"  # accepted, refused, invalid, not sent
    status: str | None = None
    fee: str | None = None
    failure_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    completed_at: str | None = None
    retried_as: str | None = None
    """The retry that claimed the row while the run ran (`tasks.payouts.retry_rows`): it pays the row
    again."""

    @property
    def needs_resubmit(self) -> bool:
        """Whether the resubmit sheet carries the row (`needs_retry`; not when a retry claimed it already)."""
        return needs_retry(self.submission, self.status) and not self.retried_as


@dataclass(frozen=True, slots=True)
class RowFacts:
    """What the run knows of a valid row besides its outcome: amount sent, pre-flight's name check."""

    amount: Decimal | None = None
    currency: str | None = None
    holder_name: str | None = None
    name_check: str | None = None


def row_facts(rows: Iterable[PayoutRow], names: Iterable[NameCheck] = ()) -> dict[int, RowFacts]:
    """Per sheet row: the validated amount and currency (``PayoutRow``) and the holder name and verdict of the
    pre-flight's name check (``NameCheck``; rows without one were not checked)."""
    checks = {n.row: n for n in names}
    return {r.row: row_fact(r, checks.get(r.row)) for r in rows}


def row_fact(row: PayoutRow, check: NameCheck | None) -> RowFacts:
    """A valid row's facts: its ``PayoutRow``'s amount and currency, its ``NameCheck`` (None: unchecked)."""
    return RowFacts(
        row.amount, row.currency, check.holder_name if check else None, check.verdict if check else None
    )
