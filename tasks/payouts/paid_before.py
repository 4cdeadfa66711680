"""Paid before: a sheet, or its rows, that a payout run sent in the last days
(``PayopsSettings.paid_before_days``).

Every run records what it was approved to pay just before it sends (`tasks.ledger.run_reconciliation
.record_approved_payouts`): with each payout the digest of its payee number, amount and currency
(`row_digest`), and with the run its sheet's fingerprint (`sheet_fingerprint`: the label a run of the sheet
takes when none is given) and the name it is shown by. `paid_before` looks a sheet's rows up there, on the
digest's index, `LOOKUP_CHUNK` rows a query, and names each earlier run with what paying again would do:

* a row sent again with the **same reference** is only replayed, never paid twice (the service answers a
  reference it knows with its first answer): so the same sheet under the same label, whose references are
  a function of the label and the sheet (`tasks.wire.references`), or rows carrying their own references;
* a row sent with **another reference** (another label, rows without references of their own) is paid a
  second time: a deliberate second payment, which an approver must acknowledge (the approval finding
  `PAID_BEFORE`, acknowledged like the name-check findings, `tasks.approval.approval_gate`).

The console's preview, `payops check` and the approval request all call `paid_before`: one rule.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import islice
from typing import Any

from payops.store.reconciliation import ReconciliationStore
from payops.tasks.runtime.plurals import counted
from payops.tasks.wire.money import money
from payops.tasks.wire.references import payout_reference

PAID_BEFORE = "paid_before"
"""The approval finding of rows another run (another label) paid in the window: paying them is a second
payment, which an approver must acknowledge."""
LOOKUP_CHUNK = 500
"""Rows looked up per query (one ``IN (...)`` on the digest's index)."""
DIGEST_LENGTH = 32
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")


def payee_number(destination: str) -> str:
    """A payee's number as compared: lower case, without spaces or punctuation (``+233 24-123`` is
    ``23324123``)."""
    return _NOT_ALNUM.sub("", destination.lower())


def row_digest(destination: str, amount: Decimal, currency: str) -> str:
    """The digest of a payout's payee number, amount (two decimals) and currency: what `paid_before`
    compares (the row number, reference, provider and note do not count)."""
    text = f"{payee_number(destination)}|{money(amount)}|{currency.upper()}"
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


def digest_of(row: Any) -> str:
    """`row_digest` of a payout row (anything with ``destination``, ``amount`` and ``currency``)."""
    return row_digest(row.destination, row.amount, row.currency)


def window_start(days: int, now: datetime | None = None) -> datetime:
    return (now or datetime.now(UTC)) - timedelta(days=days)


@dataclass(frozen=True)
class EarlierRun:
    """A run that sent some of a sheet's rows in the window, and what paying the sheet again would do."""

    label: str
    name: str
    sent_at: datetime
    rows: int  # the payouts that run sent
    matched: int  # this sheet's rows it paid (same payee number, amount and currency)
    same_sheet: bool
    same_label: bool
    paid_again: int = 0  # of those, the rows this sheet sends with another reference: paid a second time

    @property
    def replay(self) -> bool:
        """Paying again only replays what it sent (every matching row has its reference)."""
        return self.paid_again == 0

    def when(self) -> str:
        return self.sent_at.astimezone(UTC).strftime("%Y-%m-%d at %H:%M UTC")

    def named(self) -> str:
        return self.name if self.name == self.label else f"{self.name} (label {self.label})"

    def sentence(self, sheet_rows: int) -> str:
        """One line for people: the earlier run, when it sent, what it paid, what paying again does."""
        what = (
            f"this same sheet ({counted(self.rows, 'row')})"
            if self.same_sheet
            else f"{self.matched:,} of this sheet's {counted(sheet_rows, 'row')} (same payee number, amount "
            "and currency)"
        )
        if self.replay:
            how = "the same label" if self.same_label else "the same references"
            then = f"this run sends them with {how}, so paying again only replays it: nothing is paid twice"
        else:
            some = "them" if self.paid_again == self.matched else f"{self.paid_again:,} of them"
            how = "with other references" if self.same_label else "under another label"
            then = f"this run sends {some} {how}, so paying would pay them a second time: the approver must "
            then += "acknowledge it"
        return f"run {self.named()} sent {what} on {self.when()}; {then}"

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "name": self.name,
            "sent_at": self.sent_at.isoformat(),
            "rows": self.rows,
            "matched": self.matched,
            "same_sheet": self.same_sheet,
            "same_label": self.same_label,
            "paid_again": self.paid_again,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EarlierRun:
        sent = datetime.fromisoformat(str(data["sent_at"]))
        return cls(
            str(data["label"]),
            str(data.get("name") or data["label"]),
            sent if sent.tzinfo else sent.replace(tzinfo=UTC),
            int(data.get("rows", 0)),
            int(data.get("matched", 0)),
            bool(data.get("same_sheet")),
            bool(data.get("same_label")),
            int(data.get("paid_again", 0)),
        )


@dataclass
class PaidBefore:
    """What `paid_before` found for a sheet about to be paid as ``label``."""

    label: str
    days: int
    sheet_rows: int = 0
    earlier: list[EarlierRun] = field(default_factory=list)
    second_rows: list[int] = field(default_factory=list)
    """Sheet rows an earlier run paid under another reference (and none under this one): paid twice."""
    unread: str = ""
    """Why nothing was looked up although it should have been (the database could not be read), else ""."""

    @property
    def second_payment(self) -> bool:
        return any(not e.replay for e in self.earlier)

    def lines(self) -> list[str]:
        """For people: each earlier run, oldest first (none found: nothing)."""
        if self.unread:
            return [f"not looked up: {self.unread}"]
        return [e.sentence(self.sheet_rows) for e in self.earlier]

    def finding(self) -> dict[str, list[int]]:
        """The approval finding an approver must acknowledge (none when nothing would be paid twice)."""
        return {PAID_BEFORE: sorted(self.second_rows)} if self.second_payment else {}

    def as_json(self) -> list[dict[str, Any]]:
        return [e.as_json() for e in self.earlier]


def paid_before(
    store: ReconciliationStore,
    rows: Iterable[Any],
    label: str,
    sheet: str | None,
    days: int,
    *,
    retried: Iterable[str] = (),
    now: datetime | None = None,
) -> PaidBefore:
    """The runs that sent this sheet (its fingerprint ``sheet``) or any of its ``rows`` (same payee number,
    amount and currency) in the last ``days`` (0: not looked up), and what paying them as ``label`` would
    do. ``rows`` is read once, `LOOKUP_CHUNK` at a time (a spilled sheet's rows need not be held). The runs
    ``retried`` (a retry of failed rows: the runs whose rows it pays again, `store.retries.RetryRows
    .ancestors`) are left out: their failed rows were not paid."""
    found = PaidBefore(label, days)
    if days <= 0:
        return found
    since = window_start(days, now)
    skip = set(retried) - {label}
    matched: Counter[str] = Counter()
    again: Counter[str] = Counter()
    it = iter(rows)
    while chunk := list(islice(it, LOOKUP_CHUNK)):
        found.sheet_rows += len(chunk)
        digests = [digest_of(r) for r in chunk]
        sent: dict[str, dict[str, set[str]]] = {}  # digest -> label -> references
        for digest, paid_by, reference in store.paid_digests(set(digests), since):
            if paid_by not in skip:
                sent.setdefault(digest, {}).setdefault(paid_by, set()).add(reference)
        for r, digest in zip(chunk, digests, strict=True):
            by = sent.get(digest)
            if not by:
                continue
            matched.update(by.keys())
            reference = payout_reference(r, label)
            if any(reference in refs for refs in by.values()):
                continue  # sent with this reference before: only replayed
            again.update(by.keys())
            found.second_rows.append(r.row)
    runs = [r for r in store.sent_runs(matched, sheet=sheet, since=since) if r.label not in skip]
    found.earlier = [
        EarlierRun(
            run.label,
            run.name or run.label,
            run.sent_from,
            run.rows,
            matched.get(run.label, 0),
            bool(sheet) and run.sheet == sheet,
            run.label == label,
            again.get(run.label, 0),
        )
        for run in runs
    ]
    return found


def earlier_runs(data: Sequence[dict[str, Any]]) -> list[EarlierRun]:
    """Earlier runs as an approval request keeps them (`PaidBefore.as_json`)."""
    return [EarlierRun.from_json(d) for d in data]
