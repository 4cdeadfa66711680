"""Run reconciliation: a payout run's approved rows matched to the service's payouts and transactions.

What payops approved is recorded before a run sends (`record_approved_payouts`: each reference, amount and
the pre-flight's fee bound; a large run records it a part at a time). When the run ends, and again whenever
one of its payouts changes later (webhook or events catch-up, `flows/reconcile.py`), `reconcile_run` reads the
run's payouts back (the transaction list over the run's sending window, pages of 100, in time windows read
at once; a GET per reference only for those not in it) and `match_run` joins the two on the reference. Each
difference has a kind (`KINDS`). The wallet effect of a transaction, shared with the daily close
(`tasks/ledger/daily_close.py`), lives here too.

Memory does not grow with the run (beyond the differences found): `reconcile_run` keeps the approved payouts
and the records as compact rows in a temporary file (`tasks.ledger.run_match_file`), and matches them
`MATCH_CHUNK` references at a time with the code `match_run` runs on the whole run at once (`RunTally`): each
chunk is joined in reference order, so chunks in reference order give the same differences in the same order.

Money is compared in integer cents (an exact two-decimal amount times 100), never float.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

from payops.connectors.payments import NotFoundError, PaymentsClient, PaymentsSettings
from payops.connectors.payments.ledger_page import LedgerTransactionPage, cents
from payops.connectors.payments.models import (
    COLLECTION_FINAL_STATUSES,
    MONEY_MOVED_STATUSES,
    PAYOUT_FINAL_STATUSES,
    SETTLEMENT_PAYMENT_FINAL_STATUSES,
    TRANSFER_FINAL_STATUSES,
    UTILITY_PURCHASE_FINAL_STATUSES,
)
from payops.store.reconciliation import Difference, IntendedPayout, ReconciliationStore
from payops.store.settings import PayopsSettings
from payops.tasks.ledger.run_match_file import RunMatchFile
from payops.tasks.payouts.paid_before import digest_of
from payops.tasks.payouts.run_summary import RunReconciliationFigures
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.retries import API_TASK_RETRY
from payops.tasks.wire.money import money
from payops.tasks.wire.references import label_slug, payout_reference, row_reference_slug
from prefect import task
from prefect.cache_policies import NO_CACHE

log = logging.getLogger(__name__)

KINDS = {
    "missing_at_service": "approved and sent by payops, but the service has no such payout",
    "not_sent_by_payops": "a payout carrying the run's references that payops did not send",
    "amount_different": "the service's amount is not the approved amount",
    "fee_outside_bound": "the fee is outside the pre-flight's bound for the row",
    "platform_mismatched": "the platform's reconciliation says mismatched",
    "unchecked_too_long": "still unchecked by the platform after the set time",
    "reversed_after_delivery": "refunded or reversed after delivery",
    "balance_unexplained": "the wallet changed by more or less than the movements between two closes",
}
"""Every kind of difference, with what it means (reports and docs show these words)."""

FINAL_STATUSES: Mapping[str, frozenset[str]] = {
    "payout": PAYOUT_FINAL_STATUSES,
    "collection": COLLECTION_FINAL_STATUSES,
    "utility": UTILITY_PURCHASE_FINAL_STATUSES,
    "wallet_transfer": TRANSFER_FINAL_STATUSES,
    "settlement": SETTLEMENT_PAYMENT_FINAL_STATUSES,
}
MONEY_MOVED = MONEY_MOVED_STATUSES
WINDOW_MARGIN = timedelta(minutes=5)
"""Read the run's payouts this much before its first and after its last send (clocks differ a little)."""
PAGE = 100
DEFAULT_UNCHECKED_AFTER = timedelta(hours=24)
MATCH_CHUNK = 5_000
"""References matched at a time by `reconcile_run` (at most this many approved payouts and records): about
4 MB of rows. 20,000 at a time held 17 MB more at the peak of a 100,000-row run's report phase
(`payouts_e2e --rows 100000`), for no gain in speed."""
READ_CHUNK = 5_000
"""Approved payouts read from the payops database at a time."""
GET_CHUNK = 500
"""References not in the listing read from the match file at a time (then a GET each)."""
READS_AT_ONCE = 32
"""Slices of a transaction window (`Transactions.read_window`) and GETs in flight at once, for a run's check
and the daily close. A list read after a cursor is sequential: 2,000 payouts are 20 round trips, 2 s at
100 ms each; in slices of about a page each, read at once, one or two. The client's rate limiter still paces
every request."""


def from_cents(value: int) -> str:
    return money(Decimal(value) / 100)


def wallet_effect(record: Any) -> int:
    """What a transaction did to the wallet's total (balances + reserved), in signed cents: 0 until its
    money moved; a payer amount (amount + fee) out, a recipient amount in."""
    status, direction = record.status, getattr(record, "direction", None) or "out"
    refunded_with_reversal = status == "refunded" and record.compensation is not None and direction == "out"
    if status not in MONEY_MOVED and not refunded_with_reversal:
        return 0
    if direction == "in":
        return cents(record.recipient_amount if record.recipient_amount is not None else record.amount)
    if record.payer_amount is not None:
        return -cents(record.payer_amount)
    return -(cents(record.amount) + cents(record.fee))


def is_final(record: Any) -> bool:
    kind = getattr(record, "kind", None) or "payout"
    return record.status in FINAL_STATUSES.get(kind, PAYOUT_FINAL_STATUSES)


def reconciliation_status(record: Any) -> str:
    return record.reconciliation.status if record.reconciliation else "unchecked"


# ---------------------------------------------------------------------------------------------------------
# What a run was approved to pay
# ---------------------------------------------------------------------------------------------------------


def approved_payouts(label: str, rows: Iterable[Any], fees_by_row: Mapping[int, Any]) -> list[IntendedPayout]:
    """Each valid row as sent (reference as `tasks.payouts.batching` builds it) with the pre-flight's fee
    bound and the digest of its payee number, amount and currency."""
    out = []
    for r in rows:
        fee = fees_by_row.get(r.row)
        out.append(
            IntendedPayout(
                payout_reference(r, label),
                r.row,
                money(r.amount),
                r.currency,
                money(fee.low) if fee is not None else None,
                money(fee.high) if fee is not None else None,
                digest_of(r),
            )
        )
    return out


def open_store(settings: PayopsSettings) -> ReconciliationStore:
    """The reconciliation tables on the process's payops database (`store.open_database`)."""
    from payops.store import open_database

    return ReconciliationStore(open_database(settings))


async def record_approved_payouts(
    settings: PayopsSettings,
    label: str,
    rows: Iterable[Any],
    fees_by_row: Mapping[int, Any],
    *,
    first: bool = True,
    sheet: str | None = None,
    name: str | None = None,
) -> None:
    """Record what run ``label`` is about to send (before it sends), with each payout's digest of payee
    number, amount and currency and the run's sheet fingerprint and shown name (what
    `tasks.payouts.paid_before` finds a sheet paid before by). A large run records it a part at a
    time (tens of thousands of rows each): its first part with ``first=True`` (the default: replaces an
    earlier attempt's record of the label), every later one with ``first=False`` (added to it). A database
    that cannot be written costs the run its automatic reconciliation, never its payouts: logged as an
    error."""

    def write() -> None:
        store = open_store(settings)
        payouts = approved_payouts(label, rows, fees_by_row)
        store.record_intent(label, datetime.now(UTC), payouts, first=first, sheet=sheet or None, name=name)

    try:
        await asyncio.to_thread(write)
    except Exception as exc:  # noqa: BLE001 - the payouts go on; reconciliation says the run was not recorded
        log.error("run %s: approved payouts not recorded (%s: %s)", label, type(exc).__name__, exc)


# ---------------------------------------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------------------------------------


@dataclass
class RunMatch:
    """The result of matching one run."""

    label: str
    status: str  # clean, open (payouts still moving), differences
    rows: int
    matched: int
    open: int
    differences: list[Difference] = field(default_factory=list)
    records: int = 0
    wallet_effect_c: dict[str, int] = field(default_factory=dict)
    """What the service's records of the run did to the wallet, in signed cents by currency (`wallet_effect`;
    0 for a payout whose money has not moved yet): the run's totals (`tasks.reports.money_moved`) equal it
    once every payout is final."""

    def by_kind(self) -> dict[str, int]:
        return dict(sorted(Counter(d.kind for d in self.differences).items()))

    def as_summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "rows": self.rows,
            "matched": self.matched,
            "open": self.open,
            "differences": len(self.differences),
            "by_kind": self.by_kind(),
            "wallet_effect": {cur: from_cents(c) for cur, c in sorted(self.wallet_effect_c.items())},
        }


NO_TIME = -(2**63)
"""A missing time in a record's time columns (NaT's value when the daily close makes them datetimes)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _micros(moment: datetime | None) -> int:
    """A time as integer microseconds since the epoch (`NO_TIME` for None; a time without a zone is UTC):
    exact, compact in a match file, and a whole column of them becomes a datetime column in one step."""
    if moment is None:
        return NO_TIME
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def _moment(micros: int) -> datetime | None:
    """`_micros` undone."""
    return None if micros == NO_TIME else _EPOCH + micros * _MICROSECOND


class RecordColumns:
    """The service's records as columns (`NAMES`), appended a page at a time (so a long listing is turned
    into compact values while the next page is read, and its records need not be kept): cents as integers,
    times as `_micros`. A run's match reads them as rows (`rows`, `Record`); the daily close as a frame."""

    NAMES = (
        "reference", "id", "kind", "direction", "status", "currency", "amount_c", "fee_c", "effect_c",
        "recon", "completed_at", "created_at", "parent", "compensation", "final",
    )  # fmt: skip

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in self.NAMES}

    def add(self, records: Sequence[Any]) -> None:
        """Append ``records`` (payouts or transactions), one column at a time."""
        c = self.columns
        c["reference"] += [r.reference for r in records]
        c["id"] += [getattr(r, "id", None) for r in records]
        c["kind"] += [getattr(r, "kind", None) or "payout" for r in records]
        c["direction"] += [getattr(r, "direction", None) or "out" for r in records]
        c["status"] += [r.status for r in records]
        c["currency"] += [r.currency for r in records]
        c["amount_c"] += [cents(r.amount) for r in records]
        c["fee_c"] += [None if r.fee is None else cents(r.fee) for r in records]
        c["effect_c"] += [wallet_effect(r) for r in records]
        c["recon"] += [reconciliation_status(r) for r in records]
        c["completed_at"] += [_micros(r.completed_at) for r in records]
        c["created_at"] += [_micros(r.created_at) for r in records]
        c["parent"] += [r.parent.reference if r.parent else None for r in records]
        c["compensation"] += [r.compensation.reference if r.compensation else None for r in records]
        c["final"] += [is_final(r) for r in records]

    def rows(self) -> list[tuple[Any, ...]]:
        """The records added so far, a tuple each with the values in `NAMES` order (for a match file)."""
        return list(zip(*self.columns.values(), strict=True))

    def add_rows(self, rows: Sequence[Sequence[Any]]) -> None:
        """Append records as `rows` gave them (integers where it gave booleans count the same)."""
        for name, values in zip(self.NAMES, zip(*rows, strict=True), strict=False):  # none: no rows
            self.columns[name] += values


class Record(NamedTuple):
    """One service record as a match reads it (a `RecordColumns` row)."""

    reference: str
    id: str | None
    kind: str
    direction: str
    status: str
    currency: str
    amount_c: int
    fee_c: int | None
    effect_c: int
    recon: str
    completed_at: int
    created_at: int
    parent: str | None
    compensation: str | None
    final: bool


INTENDED_COLUMNS = ("reference", "row", "approved_c", "approved_currency", "fee_low_c", "fee_high_c")


class Intended(NamedTuple):
    """One approved payout as a match reads it (`INTENDED_COLUMNS`): amounts in cents."""

    reference: str
    row: int | None
    approved_c: int
    approved_currency: str
    fee_low_c: int | None
    fee_high_c: int | None


def _intended_rows(intended: Iterable[IntendedPayout]) -> list[tuple[Any, ...]]:
    """Approved payouts as `INTENDED_COLUMNS` values: amounts in cents."""

    def c(v: str | None) -> int | None:
        return None if v is None else cents(Decimal(v))

    return [
        (p.reference, p.row, cents(Decimal(p.amount)), p.currency, c(p.fee_low), c(p.fee_high))
        for p in intended
    ]


def _outside(fee: int | None, low: int | None, high: int | None) -> bool:
    """A fee outside the pre-flight's bound ``low..high`` (no fee, or no bound: not outside)."""
    if fee is None or low is None:
        return False
    return fee < low or (high is not None and fee > high)


class RunTally:
    """A run's match built a chunk of references at a time: each chunk's differences by kind and its counts,
    combined into one `RunMatch` (`result`) equal to the match of the whole run at once, provided the chunks
    are disjoint ranges of references given in order.

    A chunk is a full outer join on the reference, in reference order. Hand-rolled over plain tuples, not a
    data-frame join: a chunk is at most `MATCH_CHUNK` rows whose references are unique on each side (the
    match file's keys), so two dictionaries join it, and the payout flow that runs it need not load pandas
    (about 0.12 s and 45 MB of a 2,000-row run's process, docs/performance.md)."""

    def __init__(
        self, label: str, now: datetime, unchecked_after: timedelta = DEFAULT_UNCHECKED_AFTER
    ) -> None:
        self.label, self.now, self.unchecked_after = label, now, unchecked_after
        self.rows = self.matched = self.open = self.records = 0
        self.found: dict[str, list[Difference]] = {kind: [] for kind in KINDS}
        self.effect_c: Counter[str] = Counter()

    def add(self, intended: Sequence[Sequence[Any]], records: Sequence[Sequence[Any]]) -> None:
        """Match one chunk: approved rows (`INTENDED_COLUMNS` values) with the service's records
        (`RecordColumns` rows) on the reference, a reference at a time in order; payouts not final yet are
        open, not differences."""
        exp = {row[0]: Intended._make(row) for row in intended}
        got = {row[0]: Record._make(row) for row in records}
        self.rows += len(exp)
        self.records += len(got)
        for r in got.values():
            self.effect_c[r.currency] += r.effect_c
        for reference in sorted(exp.keys() | got.keys()):
            e, r = exp.get(reference), got.get(reference)
            if r is None and e is not None:
                approved, detail = from_cents(e.approved_c), f"row {e.row}: no payout at the service"
                self._found("missing_at_service", e, e.approved_currency, approved, None, detail)
            elif e is None and r is not None:
                detail = f"{reference} ({r.status}) not approved in this run"
                self._found("not_sent_by_payops", r, r.currency, None, from_cents(r.amount_c), detail)
            elif e is not None and r is not None:
                differences = self._compare(e, r)
                self.open += not r.final
                self.matched += not differences

    def _compare(self, e: Intended, r: Record) -> int:
        """Every difference between an approved payout and its record (how many were found)."""
        found = 0

        def diff(kind: str, expected: str | None, actual: str | None, detail: str) -> None:
            nonlocal found
            found += 1
            self._found(kind, r, r.currency or e.approved_currency, expected, actual, detail)

        if r.amount_c != e.approved_c:
            diff("amount_different", from_cents(e.approved_c), from_cents(r.amount_c), f"row {e.row}")
        if _outside(r.fee_c, e.fee_low_c, e.fee_high_c):
            high = "" if e.fee_high_c is None else from_cents(e.fee_high_c)
            bound = f"{from_cents(e.fee_low_c or 0)}..{high}"
            detail = f"row {e.row}: fee outside the pre-flight's bound"
            diff("fee_outside_bound", bound, from_cents(r.fee_c or 0), detail)
        if r.recon == "mismatched":
            diff("platform_mismatched", None, r.status, f"row {e.row}")
        completed = _moment(r.completed_at)
        if r.recon == "unchecked" and r.final and completed and completed <= self.now - self.unchecked_after:
            diff("unchecked_too_long", None, r.status, f"row {e.row}: unchecked since {completed}")
        if r.status == "refunded" or r.compensation is not None:
            detail = f"row {e.row}: {r.compensation or r.status}"
            diff("reversed_after_delivery", from_cents(e.approved_c), r.status, detail)
        return found

    def _found(
        self,
        kind: str,
        of: Intended | Record,
        currency: str,
        expected: str | None,
        actual: str | None,
        detail: str,
    ) -> None:
        found = Difference(kind, of.reference, self.label, currency, expected, actual, detail)
        self.found[kind].append(found)

    def result(self) -> RunMatch:
        """The whole run's match: differences by kind in `KINDS` order, each kind by reference."""
        diffs = [d for kind in KINDS for d in self.found[kind]]
        status = "differences" if diffs else ("open" if self.open else "clean")
        effect = dict(self.effect_c)
        return RunMatch(self.label, status, self.rows, self.matched, self.open, diffs, self.records, effect)


def match_run(
    label: str,
    intended: Sequence[IntendedPayout],
    records: Sequence[Any],
    now: datetime,
    unchecked_after: timedelta = DEFAULT_UNCHECKED_AFTER,
) -> RunMatch:
    """Join the approved rows with the service's records on the reference (a full outer join) and list every
    difference by kind; payouts not final yet are open, not differences. All in memory, as one chunk
    (`match_file` matches a run of any size)."""
    columns = RecordColumns()
    columns.add(records)
    tally = RunTally(label, now, unchecked_after)
    tally.add(_intended_rows(intended), columns.rows())
    return tally.result()


def match_file(
    label: str,
    file: RunMatchFile,
    now: datetime,
    unchecked_after: timedelta = DEFAULT_UNCHECKED_AFTER,
) -> RunMatch:
    """`match_run` over a match file, `MATCH_CHUNK` references at a time."""
    tally = RunTally(label, now, unchecked_after)
    for intended, records in file.chunks(MATCH_CHUNK):
        tally.add(intended, records)
    return tally.result()


# ---------------------------------------------------------------------------------------------------------
# Reading the run back
# ---------------------------------------------------------------------------------------------------------


def new_match_file(directory: Path | None = None) -> RunMatchFile:
    """An empty match file with this module's columns (in ``directory``, else the system's temporary one)."""
    return RunMatchFile(INTENDED_COLUMNS, RecordColumns.NAMES, directory)


def copy_intended(store: ReconciliationStore, label: str, file: RunMatchFile) -> None:
    """Run ``label``'s approved payouts into ``file``, `READ_CHUNK` at a time."""
    for part in store.intended_chunks(label, READ_CHUNK):
        file.add_intended(_intended_rows(part))


@dataclass
class SentSpan:
    """When the service created the payouts a run sent (its batches' answers, in the service's clock): where
    the run-end check looks for them (`list_windows`). Payouts created before ``since`` (the run's start)
    were sent by an earlier run with the label and replayed: counted, not spanned."""

    since: datetime
    first: datetime | None = None
    last: datetime | None = None
    replayed: int = 0

    def add(self, created_at: datetime | None) -> None:
        if created_at is None:
            return
        if created_at < self.since:
            self.replayed += 1
            return
        self.first = created_at if self.first is None else min(self.first, created_at)
        self.last = created_at if self.last is None else max(self.last, created_at)

    @property
    def span(self) -> tuple[datetime, datetime] | None:
        """``[first, last]`` as a window (its end 1 ms on: the service shows milliseconds), None if none."""
        if self.first is None or self.last is None:
            return None
        return self.first, self.last + timedelta(milliseconds=1)


def list_windows(
    start: datetime, end: datetime, sending: tuple[datetime, datetime] | None, payouts: int
) -> list[tuple[datetime, datetime]]:
    """``[start, end)`` cut into windows ``[from, to)`` that partition it, so each payout is listed once: the
    ``sending`` span (where the run's payouts were created, about evenly over time: its `SentSpan`, else its
    first send to its end) in one window per `PAGE` ``payouts`` (at most `READS_AT_ONCE`, less the two
    margins), the margins before and after it one window each."""
    if sending is None:
        return [(start, end)]
    low, high = max(start, sending[0]), min(end, sending[1])
    if high <= low:
        return [(start, end)]
    parts = max(1, min(READS_AT_ONCE - 2, -(-payouts // PAGE)))
    step = (high - low) / parts
    cuts = [low + step * i for i in range(parts)] + [high]
    windows = [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if a < b]
    return [w for w in [(start, low), *windows, (high, end)] if w[0] < w[1]]


async def fetch_run_records(
    client: PaymentsClient,
    label: str,
    file: RunMatchFile,
    start: datetime,
    end: datetime,
    sending: tuple[datetime, datetime] | None = None,
) -> None:
    """The run's payouts into ``file``: the payout list over ``[start, end)`` (pages of 100, in the time
    windows of `list_windows`, cut again where dense and read at once: `Transactions.read_window`), keeping
    the run's approved references (those in ``file``) and any carrying its reference pattern; then a GET
    per approved reference the windows did not hold (replays of an earlier attempt), `GET_CHUNK` references
    read from the file at a time. A reference the service does not know is left out."""
    slug = label_slug(label)
    at_once = asyncio.Semaphore(READS_AT_ONCE)

    def keep(records: Sequence[Any]) -> None:
        columns = RecordColumns()
        columns.add(records)
        file.put_records(columns.rows())

    def keep_ours(page: list[Any]) -> None:
        ours = file.intended_among([tx.reference for tx in page])
        keep(
            [
                tx
                for tx in page
                if tx.reference in ours or (tx.direction != "in" and row_reference_slug(tx.reference) == slug)
            ]
        )

    async def read_one(reference: str, found: list[Any]) -> None:
        async with at_once:
            try:
                found.append(await client.payouts.get(reference))
            except NotFoundError:
                return

    windows = list_windows(start, end, sending, file.intended_count())
    # The windows are a first cut; a dense one (other runs' payouts in the span) is cut again as it is read.
    await client.transactions.read_window(
        keep_ours,
        from_=start,
        to=end,
        slices=windows,
        width=lambda: READS_AT_ONCE,
        kind="payout",
        limit=PAGE,
        page=LedgerTransactionPage,  # the fields the match reads, amounts as listed: a lighter parse
    )
    for part in file.unlisted(GET_CHUNK):
        found: list[Any] = []
        async with asyncio.TaskGroup() as group:
            for reference in part:
                group.create_task(read_one(reference, found))
        keep(found)


@dataclass
class RunCheck:
    """A stored run check, as a flow reports it."""

    label: str
    check_id: int | None
    checked_at: datetime
    summary: RunReconciliationFigures
    differences: list[Difference]
    api_calls: Counter[str] = field(default_factory=Counter)


async def reconcile_run(
    client: PaymentsClient,
    store: ReconciliationStore,
    label: str,
    trigger: str,
    *,
    unchecked_after: timedelta = DEFAULT_UNCHECKED_AFTER,
    now: datetime | None = None,
    scratch_dir: Path | None = None,
    created: tuple[datetime, datetime] | None = None,
) -> RunCheck:
    """Match run ``label`` now and store the check (with its differences); LookupError when payops has no
    record of the run. The approved payouts and the records read back wait in a match file (in
    ``scratch_dir``, else the system's temporary directory; deleted after), so memory does not grow with
    the run. ``created``: when the run's own payouts were created (`SentSpan`), known at the run's end;
    else its first send to its end."""
    run = await asyncio.to_thread(store.run, label)
    if run is None:
        raise LookupError(f"no payout run {label!r} is recorded for reconciliation")
    now = now or datetime.now(UTC)
    sending = created or (run.sent_from, run.ended_at or now)
    with new_match_file(scratch_dir) as file:
        await asyncio.to_thread(copy_intended, store, label, file)
        start, end = run.sent_from - WINDOW_MARGIN, (run.ended_at or now) + WINDOW_MARGIN
        await fetch_run_records(client, label, file, start, end, sending)
        match = await asyncio.to_thread(match_file, label, file, now, unchecked_after)
    summary = RunReconciliationFigures(**match.as_summary(), trigger=trigger, checked_at=now.isoformat())
    stored = summary.model_dump(exclude_unset=True)
    check_id = await asyncio.to_thread(
        store.save_check, "run", label, trigger, match.status, stored, match.differences, checked_at=now
    )
    return RunCheck(label, check_id, now, summary, match.differences, Counter(client.api_calls))


async def label_for_reference(store: ReconciliationStore, reference: str) -> str | None:
    """The run a payout reference belongs to: approved in it, or a reversal's parent approved in it."""
    found = await asyncio.to_thread(store.labels_of, [reference])
    return found.get(reference)


@task(cache_policy=NO_CACHE, name="reconcile-run", **API_TASK_RETRY)
async def reconcile_run_task(
    settings: PaymentsSettings,
    payops: PayopsSettings,
    label: str,
    trigger: str,
    unchecked_after_s: float,
    rate_per_s: float,
    created: tuple[datetime, datetime] | None = None,
) -> RunCheck:
    """One task per run check: its list pages and per-reference reads, then the match and the store."""
    store = await asyncio.to_thread(open_store, payops)
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        after = timedelta(seconds=unchecked_after_s)
        return await reconcile_run(client, store, label, trigger, unchecked_after=after, created=created)


def refused_references(outcomes: Iterable[Any]) -> Iterator[str]:
    """The references of the rows the service refused (never paid), from a run's row outcomes, as they
    come (`reconcile_at_run_end` takes them so)."""
    return (o.reference for o in outcomes if o.submission == "refused" and o.reference)


async def reconcile_at_run_end(
    settings: PaymentsSettings,
    payops: PayopsSettings,
    label: str,
    refused: Iterable[str],
    rate_per_s: float,
    created: tuple[datetime, datetime] | None = None,
) -> RunReconciliationFigures:
    """The payout flow's closing step: mark the run ended (the ``refused`` references were never paid: they
    leave the record; an iterable read once, as it goes, e.g. `refused_references(outcomes)`), reconcile
    it (``created``: when its payouts were created, `SentSpan`), and return the summary's
    ``reconciliation`` entry. A failure is reported in that entry and logged;
    the payouts are done and reported either way."""

    def end() -> None:
        store = open_store(payops)
        store.forget(label, refused)
        store.mark_ended(label, datetime.now(UTC))

    try:
        await asyncio.to_thread(end)
        after = DEFAULT_UNCHECKED_AFTER.total_seconds()
        check = await reconcile_run_task(settings, payops, label, "run-end", after, rate_per_s, created)
    except Exception as exc:  # noqa: BLE001 - reconciliation is re-run later (`payops reconcile --run`)
        log.error("run %s: reconciliation failed (%s: %s)", label, type(exc).__name__, exc)
        return RunReconciliationFigures(status="failed", error=f"{type(exc).__name__}: {str(exc)[:200]}")
    return check.summary
