"""The one definition of a payout row needing a person, and the list of such rows a run keeps.

A row needs a person when the sheet had it wrong (invalid), the service refused it, it failed or came back
(refunded), it waits for a review or hold at the service, or its payee name was not confirmed (mismatch,
partial match, unverified lookup, or no name column to check at all). The run summary (``attention_rows``),
the reports (highlighted rows, the resubmit sheet), the attention artifact and `payops runs show` all read
:func:`outcome_kind` and :data:`RETRY_KINDS` from here. Statuses come from the connector's sets.

Kept in the run's JSON summary so the console and the CLI show them without opening the xlsx report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Required

from payops.connectors.payments.failure_words import FailureWords, failure_words, retried_next_step
from payops.connectors.payments.models import (
    PAYOUT_FAILED_STATUSES,
    PAYOUT_FINAL_STATUSES,
)
from payops.tasks.rows.outcome import outcome_kind
from typing_extensions import TypedDict  # pydantic reads its fields on Python < 3.12

if TYPE_CHECKING:
    from payops.tasks.rows.name_check import NameCheck
    from payops.tasks.rows.outcome import RowOutcome
    from payops.tasks.rows.payout_row import PayoutRow

#: Outcome kinds of a row (at most one per row), in the order a person should look at them.
OUTCOME_KINDS = ("failed", "refused", "invalid", "awaiting_review")
#: Name kinds (a row may have one besides its outcome kind); ``no_name_column`` is one entry for the sheet.
NAME_KINDS = {"mismatch": "name_mismatch", "partial": "name_partial", "unverified": "name_unverified"}
NO_NAME_COLUMN = "no_name_column"
KINDS = (*OUTCOME_KINDS, *NAME_KINDS.values(), NO_NAME_COLUMN)
_PAID_STATUSES = PAYOUT_FINAL_STATUSES - PAYOUT_FAILED_STATUSES

Paid = Literal["yes", "no", "not yet"]


def row_kind(o: RowOutcome) -> str | None:
    """The kind of attention a row needs (:func:`outcome_kind`), none once a retry claimed it (the retry's
    own run says what became of it)."""
    return None if o.retried_as else outcome_kind(o.submission, o.status)


def paid(submission: str | None, status: str | None) -> Paid:
    """Whether the payee got the money: ``yes`` (delivered), ``no`` (never sent, refused, failed, refunded)
    or ``not yet`` (accepted, still moving or waiting for a review)."""
    if submission == "accepted" and status in _PAID_STATUSES:
        return "yes"
    if submission != "accepted" or status in PAYOUT_FAILED_STATUSES:
        return "no"
    return "not yet"


def charged_fee(o: RowOutcome) -> Decimal | None:
    """The fee a row costs the wallet: its payout's fee while it is paid or on its way, 0 once the payout
    failed (the service released it) or came back (refunded with its amount); None for a row the service
    never accepted or priced. The reports' Fee column and the run's fee totals (`money_moved`)."""
    if o.submission != "accepted" or not o.fee:
        return None
    return Decimal(0) if paid(o.submission, o.status) == "no" else Decimal(o.fee)


def failure_code(o: RowOutcome) -> str | None:
    """The code of what happened to a row needing a person (None: nothing to say): the service's refusal
    code, the payout's failure reason (else its status: ``refunded``, ``in_review``...), or payops' own
    ``invalid_row``. Put in words by `connectors.payments.failure_words`."""
    kind = outcome_kind(o.submission, o.status)
    if kind == "invalid":
        return "invalid_row"
    if kind == "refused":
        return o.error_code
    if kind == "failed":
        return o.failure_reason or o.status
    if kind == "awaiting_review":
        return o.status
    return None


def outcome_words(o: RowOutcome) -> tuple[str, str] | None:
    """What happened to a row and the operator's next step, in words (None: nothing happened to it); a row
    a retry claimed says so as its next step. The reports' and the artifact's words columns."""
    if outcome_kind(o.submission, o.status) is None:
        return None
    words, next_step = failure_words(failure_code(o))
    return words, retried_next_step(o.retried_as) if o.retried_as else next_step


def _explained(o: RowOutcome) -> tuple[str | None, FailureWords, str | None]:
    """A row's code, its words and next step, and the detail the words leave out: the service's message
    for a refusal, the sheet's problems for an invalid row."""
    code = failure_code(o)
    detail = o.error_message if o.submission in ("refused", "invalid") else None
    return code, failure_words(code), detail or None


def _name_reason(n: NameCheck) -> str:
    if n.verdict == "unverified":
        return f"sheet name {n.sheet_name!r} unverified: the holder of {n.destination} could not be looked up"
    what = "only partly matches" if n.verdict == "partial" else "does not match"
    return f"sheet name {n.sheet_name!r} {what} the account holder {n.holder_name!r}"


class AttentionRow(TypedDict, total=False):
    """A row needing a person, as the run summary lists it (`attention_rows`; `attention_rows` below gives
    every key, a summary read back may lack all but ``row`` and ``kind``). A plain dict, typed: a
    million-row run lists 10,000 of them, and a model each would hold ~1.3 KB more (12.8 MB measured)."""

    row: Required[int | None]
    kind: Required[str]
    reference: str | None
    payee: str | None
    amount: str | None
    currency: str | None
    status: str | None
    paid: str | None
    code: str | None
    reason: str
    detail: str | None
    next_step: str | None


ATTENTION_ROWS_KEPT = 10_000
"""The most rows a run summary lists (the first by kind, then row); ``attention_total`` counts them all, and
the reports highlight every one. A million-row run's summary stays the size of a 100,000-row one's."""


def attention_rows(
    rows: Iterable[PayoutRow],
    outcomes: Mapping[int, RowOutcome],
    names: Iterable[NameCheck],
    no_name_column: str | None = None,
    keep: int = ATTENTION_ROWS_KEPT,
) -> tuple[list[AttentionRow], int]:
    """The first ``keep`` entries (one per row and kind, ordered by kind, failed first, then row number) and
    how many there are in all; each says the row's reference, status, whether it was paid, its ``code``,
    the ``reason`` in words (a name check's own sentence), the ``detail`` the words leave out and the
    ``next_step`` (`connectors.payments.failure_words`).
    ``no_name_column``: why no payee name was checked at all (one entry for the whole sheet, row ``None``)."""
    flagged: list[tuple[int, int, int | None, str]] = [
        (KINDS.index(kind), o.row, o.row, kind) for o in outcomes.values() if (kind := row_kind(o))
    ]
    checks: dict[int, NameCheck] = {}
    for n in names:
        if n.verdict in NAME_KINDS:
            kind = NAME_KINDS[n.verdict]
            flagged.append((KINDS.index(kind), n.row, n.row, kind))
            checks[n.row] = n
    if no_name_column:
        flagged.append((KINDS.index(NO_NAME_COLUMN), 0, None, NO_NAME_COLUMN))
    total = len(flagged)
    flagged.sort()
    del flagged[keep:]
    wanted = {row for _, _, row, _ in flagged}
    by_row = {r.row: r for r in rows if r.row in wanted}  # only the listed rows: rows may be a spill's
    found: list[AttentionRow] = []
    for _, _, row, kind in flagged:
        payout = by_row.get(row) if row is not None else None
        o = outcomes.get(row) if row is not None else None
        code: str | None = kind
        detail: str | None = None
        next_step = failure_words(kind).next_step
        if row is None:
            reason = no_name_column or ""
        elif kind in NAME_KINDS.values():
            reason = _name_reason(checks[row])
        elif o is not None:
            code, (reason, next_step), detail = _explained(o)
        else:
            reason = ""
        found.append(
            {
                "row": row,
                "kind": kind,
                "reference": (o.reference if o else None) or (payout.reference if payout else None),
                "payee": payout.payee_name if payout else None,
                "amount": f"{payout.amount}" if payout else None,
                "currency": payout.currency if payout else None,
                "status": o.status if o else None,
                "paid": paid(o.submission, o.status) if o else None,
                "code": code,
                "reason": reason,
                "detail": detail,
                "next_step": next_step,
            }
        )
    return found, total


ATTENTION_TABLE_HEADERS = [
    "row",
    "reference",
    "submission",
    "status",
    "failure reason",
    "error code",
    "what happened",
    "next step",
]
"""Columns of the attention artifact (:func:`attention_table`): the codes for machines, then the words."""


def attention_table(outcomes: Mapping[int, RowOutcome]) -> list[list[Any]]:
    """The attention artifact's rows: every row whose outcome needs a person, with its words and next step."""
    table = []
    for o in outcomes.values():
        if row_kind(o):
            _, (words, next_step), _ = _explained(o)
            table.append(
                [o.row, o.reference, o.submission, o.status, o.failure_reason, o.error_code, words, next_step]
            )
    return table
