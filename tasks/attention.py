"""The rows of a finished payout run that need a person: failed, refused, awaiting review, name mismatch.

Kept in the run's JSON summary (``attention_rows``) so the console and the CLI show them without opening the
xlsx report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tasks.intake import PayoutRow
from tasks.polling import AWAITING_REVIEW
from tasks.preflight import NameCheck
from tasks.reports import RowOutcome

KINDS = ("failed", "refused", "awaiting_review", "name_mismatch")


def _kind(o: RowOutcome) -> str | None:
    if o.submission == "refused":
        return "refused"
    if o.status in {"failed", "refunded"}:
        return "failed"
    if o.status in AWAITING_REVIEW:
        return "awaiting_review"
    return None


def _reason(o: RowOutcome, kind: str) -> str:
    if kind == "refused":
        return f"{o.error_code}: {o.error_message}" if o.error_message else str(o.error_code)
    if kind == "failed":
        return o.failure_reason or o.status or "failed"
    return f"{o.status} at the service"


def attention_rows(
    rows: Iterable[PayoutRow], outcomes: Mapping[int, RowOutcome], names: Iterable[NameCheck]
) -> list[dict[str, Any]]:
    """One entry per row and kind, ordered by kind (failed first) then row number."""
    by_row = {r.row: r for r in rows}
    found: list[dict[str, Any]] = []

    def add(row: int, kind: str, reason: str, reference: str | None, status: str | None) -> None:
        payout = by_row.get(row)
        found.append(
            {
                "row": row,
                "kind": kind,
                "reference": reference or (payout.reference if payout else None),
                "payee": payout.payee_name if payout else None,
                "amount": f"{payout.amount}" if payout else None,
                "currency": payout.currency if payout else None,
                "status": status,
                "reason": reason,
            }
        )

    for o in outcomes.values():
        if kind := _kind(o):
            add(o.row, kind, _reason(o, kind), o.reference, o.status)
    for n in names:
        if n.verdict == "mismatch":
            reason = f"sheet name {n.sheet_name!r} but the account holder is {n.holder_name!r}"
            add(n.row, "name_mismatch", reason, None, None)
    return sorted(found, key=lambda a: (KINDS.index(a["kind"]), a["row"]))
