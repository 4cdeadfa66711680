"""The daily close: the wallet snapshotted, its change since the last close matched to the movements in
between, every transaction attributed to a payops run or marked outside payops, and what was still moving
or unchecked at the last close read again.

The API has no historical balance, so each close snapshots ``balances`` and ``reserved`` (their sum is the
wallet's total: a reservation moves money between them, not out). Between two closes the total must change
by exactly the sum of the movements' wallet effects (`tasks.ledger.run_reconciliation.wallet_effect`: payouts
with their fees, collections, settlements, transfers, utility purchases, reversals). Each close lists the
transactions created since the last snapshot (pages of 100, the API's largest), re-reads the items the last
close left open (one narrow list call per group of creation times, not a GET per item), and keeps, per open
item, the effect it booked so far: an item that moves later adds only what changed. A payout refunded without
a recorded reversal (its credit has no transaction line) is found by one ``status=refunded`` list over the
look-back. The day's transactions are grouped with pandas (one frame, integer cents), not row by row.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
from payops.connectors.payments import PaymentsClient, PaymentsSettings, Transaction
from payops.connectors.payments.ledger_page import LedgerTransactionPage, cents
from payops.store.reconciliation import Check, Difference, ReconciliationStore
from payops.store.settings import PayopsSettings
from payops.tasks.ledger.run_reconciliation import (
    DEFAULT_UNCHECKED_AFTER,
    PAGE,
    READS_AT_ONCE,
    RecordColumns,
    open_store,
)
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.inflight import InFlight
from payops.tasks.runtime.retries import API_TASK_RETRY
from payops.tasks.wire.references import is_settlement_reference, label_slug, row_reference_slug
from prefect import task
from prefect.cache_policies import NO_CACHE

ACCRA = ZoneInfo("Africa/Accra")
LOOKBACK = timedelta(days=7)
OUTSIDE = "outside payops"
SETTLEMENTS = "payops settlements"
GROUP_GAP = timedelta(seconds=1)


def business_day(moment: datetime) -> date:
    """The Africa/Accra calendar day of ``moment`` (the spec's limits follow Accra days)."""
    return moment.astimezone(ACCRA).date()


def money_of(value_cents: int) -> Decimal:
    """Cents as a two-decimal Decimal (a number in the xlsx, ``"12.50"`` in csv and JSON)."""
    return Decimal(value_cents).scaleb(-2)


@dataclass
class CloseData:
    """What one close read from the service: the window's and the re-read transactions as columns (built a
    page at a time, in the order read) with the payops runs their references belong to."""

    as_of: datetime
    start: datetime
    wallet: dict[str, tuple[Decimal, Decimal]]  # currency -> (balance, reserved)
    read: ReadTransactions
    old_refunds: list[Transaction]
    old_mismatched: list[Transaction]
    api_calls: Counter[str] = field(default_factory=Counter)


class ReadTransactions:
    """Transactions as they are read: their columns (`tasks.ledger.run_reconciliation.RecordColumns`) with the
    label slug their reference carries, their ids, and the run label of each reference (or parent reference)
    some payops run was approved to pay. A page is added as it arrives while other slices of the window are
    read (`Transactions.read_window`), so this work overlaps the service's paging; a transaction listed twice
    (the window's re-reads) counts once, as first read. References are looked up in the payops database
    `LOOKUP` at a time (`flush` the rest)."""

    LOOKUP = 2000

    def __init__(self, labels_of: Callable[[Iterable[str]], dict[str, str]]) -> None:
        self.columns = RecordColumns()
        self.slugs: list[str | None] = []
        self.ids: set[str] = set()
        self.labels: dict[str, str] = {}
        self._labels_of = labels_of
        self._unlooked: set[str] = set()

    def add(self, page: Sequence[Transaction]) -> None:
        fresh = []
        for tx in page:
            if tx.id not in self.ids:
                self.ids.add(tx.id)
                fresh.append(tx)
        self.columns.add(fresh)
        self.slugs += [row_reference_slug(tx.reference) for tx in fresh]
        self._unlooked.update(tx.reference for tx in fresh)
        self._unlooked.update(tx.parent.reference for tx in fresh if tx.parent)
        if len(self._unlooked) >= self.LOOKUP:
            self.flush()

    def flush(self) -> None:
        """Look up the references not looked up yet."""
        if self._unlooked:
            self.labels |= self._labels_of(self._unlooked)
            self._unlooked = set()

    def frame(self) -> pd.DataFrame:
        """The transactions as a frame (`records_frame`) with ``slug`` (`row_reference_slug`), in the list's
        order (newest first; pages arrive in the order their slices answer; ties keep the order read)."""
        frame = records_frame(self.columns).assign(slug=pd.Series(self.slugs, dtype=object))
        return frame.sort_values("created_at", ascending=False, kind="stable", ignore_index=True)


def records_frame(columns: RecordColumns) -> pd.DataFrame:
    """Records' columns as a frame: cents as int64 (the fee nullable), times as UTC datetimes (NaT where
    none, so whole columns compare), the rest as objects."""
    c = columns.columns
    typed = {"amount_c": "int64", "effect_c": "int64", "fee_c": "Int64", "final": bool}
    data: dict[str, Any] = {
        name: pd.Series(c[name], dtype=typed.get(name, object))
        for name in columns.NAMES
        if name not in ("completed_at", "created_at")
    }
    for name in ("completed_at", "created_at"):  # integer microseconds, NO_TIME (int64's least) is NaT
        micros = np.array(c[name], dtype="int64").view("M8[us]")
        data[name] = pd.Series(micros).dt.tz_localize(UTC)
    return pd.DataFrame(data, columns=list(columns.NAMES))


def _groups(items: Sequence[Mapping[str, Any]]) -> list[tuple[datetime, datetime, set[str]]]:
    """Carried items by creation time: runs of times less than `GROUP_GAP` apart, at most a page each."""
    groups: list[tuple[datetime, datetime, set[str]]] = []
    for item in sorted(items, key=lambda i: i["created_at"]):
        t = item["created_at"]
        if groups and t - groups[-1][1] < GROUP_GAP and len(groups[-1][2]) < PAGE:
            first, _last, ids = groups[-1]
            groups[-1] = (first, t, ids | {item["transaction_id"]})
        else:
            groups.append((t, t, {item["transaction_id"]}))
    return groups


async def fetch_close(
    client: PaymentsClient,
    previous: Check | None,
    carried: Sequence[Mapping[str, Any]],
    labels_of: Callable[[Iterable[str]], dict[str, str]],
    *,
    lookback: timedelta = LOOKBACK,
    gate: InFlight | None = None,
) -> CloseData:
    """Snapshot the wallet, list the transactions created since the last snapshot (the look-back on a first
    close), re-read what the last close left open, and list the late refunds and mismatches of older ones.
    Each page becomes columns and labels (``labels_of``, the payops database) while other pages are read.
    ``gate``: the client's in-flight sizing, how many requests (slices of a window) are out at once."""
    sizing: dict[str, Any] = {} if gate is None else {"width": lambda: gate.size, "gate": lambda: gate}
    accounts = await client.wallet.get()
    as_of = datetime.now(UTC)
    wallet: dict[str, tuple[Decimal, Decimal]] = {}
    for account in accounts:
        for currency, balance in account.balances.items():
            b, r = wallet.get(currency, (Decimal(0), Decimal(0)))
            wallet[currency] = (b + Decimal(balance), r + Decimal(account.reserved.get(currency, 0)))
        for currency, reserved in account.reserved.items():
            if currency not in account.balances:
                b, r = wallet.get(currency, (Decimal(0), Decimal(0)))
                wallet[currency] = (b, r + Decimal(reserved))
    start = previous.taken_at if previous and previous.taken_at else as_of - lookback
    read = ReadTransactions(labels_of)
    # The window in slices read at once, cut where dense (`Transactions.read_window`); each page is worked
    # on in the loop's thread as it arrives (a worker thread's fight for the GIL cost more than it hid), while
    # the other slices' requests are out. Pages are parsed as `LedgerTransactionPage`: the fields the columns
    # hold, amounts as listed (a lighter parse).
    await client.transactions.read_window(
        read.add, from_=start, to=as_of, limit=PAGE, page=LedgerTransactionPage, **sizing
    )
    reread: list[Transaction] = []
    for first, last, ids in _groups([i for i in carried if i["transaction_id"] not in read.ids]):
        kinds = {i["kind"] for i in carried if i["transaction_id"] in ids}
        kind = kinds.pop() if len(kinds) == 1 else None
        end = last + timedelta(milliseconds=1)
        async for tx in client.transactions.iterate(kind=kind, from_=first, to=end, limit=PAGE):
            if tx.id in ids:
                reread.append(tx)
    read.add(reread)
    read.flush()
    old_refunds: list[Transaction] = []
    old_mismatched: list[Transaction] = []
    if previous is not None:
        old_from = as_of - lookback
        for found, filters in (
            (old_refunds, {"kind": "payout", "status": "refunded"}),
            (old_mismatched, {"reconciliation_status": "mismatched"}),
        ):
            await client.transactions.read_window(
                found.extend, from_=old_from, to=start, limit=PAGE, **filters, **sizing
            )
            found.sort(key=lambda tx: (tx.created_at or as_of, tx.id), reverse=True)  # the list's order
    return CloseData(as_of, start, wallet, read, old_refunds, old_mismatched, Counter(client.api_calls))


@dataclass
class CloseResult:
    """A close: the equation per currency, attribution, differences, what stays open."""

    day: str
    as_of: datetime
    start: datetime
    status: str  # baseline (first close), balanced, differences
    balances: dict[str, dict[str, str | None]]
    differences: list[Difference]
    open_items: list[dict[str, Any]]
    transactions: pd.DataFrame
    attribution: pd.DataFrame
    runs_touched: list[str]

    def summary(self) -> dict[str, Any]:
        return {
            "day": self.day,
            "status": self.status,
            "from": self.start.isoformat(),
            "snapshot_at": self.as_of.isoformat(),
            "transactions": len(self.transactions),
            "outside_payops": int((self.transactions["label"] == OUTSIDE).sum())
            if len(self.transactions)
            else 0,
            "balances": self.balances,
            "differences": len(self.differences),
            "by_kind": dict(sorted(Counter(d.kind for d in self.differences).items())),
            "open_items": len(self.open_items),
            "runs_touched": self.runs_touched,
        }


def attribute(
    frame: pd.DataFrame, labels: Mapping[str, str], run_slugs: Mapping[str, str]
) -> tuple[pd.Series, pd.Series]:
    """Each transaction's run (approved in it, or a reversal of a payout approved in it, or payops'
    settlements) or `OUTSIDE`; and whether it carries a run's reference pattern without being approved.
    ``frame`` is `ReadTransactions.frame` (its ``slug`` column: the label slug each reference carries)."""
    by_reference = frame["reference"].map(labels)
    by_parent = frame["parent"].map(labels)
    by_slug = frame["slug"].map(run_slugs)
    settlements = frame["reference"].map(is_settlement_reference)
    label = by_reference.fillna(by_parent).fillna(by_slug)
    label = label.where(label.notna() | ~settlements, SETTLEMENTS).fillna(OUTSIDE)
    unapproved = by_reference.isna() & by_parent.isna() & by_slug.notna() & (frame["kind"] == "payout")
    return label, unapproved


def close_day(
    day: str,
    previous: Check | None,
    carried: Sequence[Mapping[str, Any]],
    data: CloseData,
    labels: Mapping[str, str],
    run_labels: Iterable[str],
    unchecked_after: timedelta = DEFAULT_UNCHECKED_AFTER,
) -> CloseResult:
    """The close's figures and differences from what `fetch_close` read (pure; pandas over integer cents):
    the window's transactions attributed, their differences, the movements and older items, the wallet
    equation per currency, and what stays open."""
    booked = {i["transaction_id"]: cents(Decimal(i["booked"])) for i in carried}
    window = _window(data, booked, labels, run_labels)
    diffs = window.differences(unchecked_after)
    movements = window.movements()
    diffs += _older_items(data, booked, labels, window, movements)
    balances, unexplained = _balances(data, previous, movements)
    diffs += unexplained
    status = "differences" if diffs else ("baseline" if previous is None else "balanced")
    touched = sorted({d.label for d in diffs if d.label and d.label not in {OUTSIDE, SETTLEMENTS}})
    return CloseResult(
        day,
        data.as_of,
        data.start,
        status,
        balances,
        diffs,
        window.open_items(),
        window.frame,
        window.attribution(),
        touched,
    )


ATTRIBUTION_COLUMNS = ["label", "kind", "direction", "currency", "transactions", "amount_c", "effect_c"]


@dataclass
class _Window:
    """The close window's transactions with what the close derives per row: the effect counted today
    (nothing for one completed after the snapshot), the change against what earlier closes booked
    (``delta_c``), the run (``label``), whether it carries a run's references unapproved, and whether it
    may still move (open). An empty window has the same columns, so every step below reads it alike."""

    frame: pd.DataFrame
    unapproved: pd.Series
    moving: pd.Series
    as_of: datetime

    def differences(self, unchecked_after: timedelta) -> list[Difference]:
        """The window's own differences: foreign references, the platform's mismatches, checks overdue,
        reversals of delivered payouts."""
        frame, out = self.frame, []
        foreign = "{r.kind} carrying run {r.label}'s references"
        out += _diffs("not_sent_by_payops", frame[self.unapproved], foreign)
        out += _diffs("platform_mismatched", frame[frame["recon"] == "mismatched"], "{r.kind} {r.id}")
        final = frame["final"].astype(bool)
        long_ago = frame["completed_at"] <= self.as_of - unchecked_after
        overdue = (frame["recon"] == "unchecked") & final & long_ago
        out += _diffs("unchecked_too_long", frame[overdue], "{r.kind} unchecked since {r.completed_at}")
        reversals = frame[frame["parent"].notna() & (frame["label"] != OUTSIDE)]
        out += _diffs("reversed_after_delivery", reversals, "reversal of {r.parent}", expected="delivered")
        return out

    def movements(self) -> Counter[str]:
        """Cents moved today per currency: each transaction's change against what was booked before."""
        moved: Counter[str] = Counter()
        for currency, delta in self.frame.groupby("currency")["delta_c"].sum().items():
            moved[str(currency)] += int(delta)
        return moved

    def open_items(self) -> list[dict[str, Any]]:
        """What the next close reads again: transactions not final, completed after the snapshot, or
        unchecked by the platform, with what this close booked for each."""
        return [
            {
                "transaction_id": r.id,
                "kind": r.kind,
                "reference": r.reference,
                "currency": r.currency or "-",
                "status": r.status,
                "created_at": r.created_at,
                "booked": f"{money_of(int(r.effect_c)):.2f}",
            }
            for r in self.frame[self.moving].itertuples(index=False)
        ]

    def attribution(self) -> pd.DataFrame:
        """Transactions, amounts and effects per run, kind, direction and currency."""
        if not len(self.frame):
            return pd.DataFrame(columns=ATTRIBUTION_COLUMNS)
        return (
            self.frame.groupby(["label", "kind", "direction", "currency"], dropna=False)
            .agg(transactions=("id", "size"), amount_c=("amount_c", "sum"), effect_c=("effect_c", "sum"))
            .reset_index()
        )


def _window(
    data: CloseData, booked: Mapping[str, int], labels: Mapping[str, str], run_labels: Iterable[str]
) -> _Window:
    """The window's frame with the close's columns (`_Window`); an empty window gets them empty."""
    frame = data.read.frame()
    if not len(frame):
        frame = frame.assign(delta_c=pd.Series(dtype="int64"), label=pd.Series(dtype=object))
        nothing = pd.Series(dtype=bool)
        return _Window(frame, nothing, nothing, data.as_of)
    after = frame["completed_at"] > data.as_of
    frame["effect_c"] = frame["effect_c"].where(~after, 0)
    frame["delta_c"] = frame["effect_c"] - frame["id"].map(booked).fillna(0).astype("int64")
    slugs = {label_slug(label): label for label in run_labels}
    frame["label"], unapproved = attribute(frame, labels, slugs)
    moving = ~frame["final"].astype(bool) | after | (frame["recon"] == "unchecked")
    return _Window(frame, unapproved, moving, data.as_of)


def _diffs(kind: str, rows: pd.DataFrame, detail: str, expected: str | None = None) -> list[Difference]:
    """A difference of ``kind`` for each row, ``detail`` formatted with the row (``{r.<column>}``)."""
    return [
        Difference(kind, r.reference, r.label, r.currency, expected, str(r.status), detail.format(r=r))
        for r in rows.itertuples(index=False)
    ]


def _older_items(
    data: CloseData,
    booked: Mapping[str, int],
    labels: Mapping[str, str],
    window: _Window,
    movements: Counter[str],
) -> list[Difference]:
    """Transactions older than the window the close read again: a payout refunded today without a
    reversal line (its payer amount came back: a movement, and a difference), and a mismatch the platform
    reported on one outside the window."""
    diffs = []
    for tx in data.old_refunds:
        done = tx.completed_at
        if tx.compensation is None and tx.id not in booked and done and data.start < done <= data.as_of:
            movements[tx.currency or "-"] += cents(tx.payer_amount or tx.amount)
            diffs.append(
                Difference(
                    "reversed_after_delivery",
                    tx.reference,
                    labels.get(tx.reference, OUTSIDE),
                    tx.currency,
                    expected="delivered",
                    actual="refunded",
                    detail="refunded without a reversal record",
                )
            )
    known = set(window.frame["id"])
    for tx in data.old_mismatched:
        if tx.id not in known:
            label, detail = labels.get(tx.reference, OUTSIDE), f"{tx.kind} {tx.id}"
            kind, currency = "platform_mismatched", tx.currency
            diffs.append(Difference(kind, tx.reference, label, currency, None, tx.status, detail))
    return diffs


def _balances(
    data: CloseData, previous: Check | None, movements: Counter[str]
) -> tuple[dict[str, dict[str, str | None]], list[Difference]]:
    """The wallet equation per currency (the balance and reserve now, and against the previous close: the
    change, the movements, what neither explains), and a difference where they disagree."""
    balances: dict[str, dict[str, str | None]] = {}
    diffs = []
    for currency in sorted(set(data.wallet) | set(previous.snapshots if previous else {}) | set(movements)):
        bal, res = data.wallet.get(currency, (Decimal(0), Decimal(0)))
        entry: dict[str, str | None] = {"balance": f"{bal:.2f}", "reserved": f"{res:.2f}"}
        if previous is not None:
            pb, pr = previous.snapshots.get(currency, ("0.00", "0.00"))
            change = cents(bal + res) - cents(Decimal(pb) + Decimal(pr))
            moved = movements.get(currency, 0)
            entry |= {
                "previous_balance": pb,
                "previous_reserved": pr,
                "change": f"{money_of(change):.2f}",
                "movements": f"{money_of(moved):.2f}",
                "unexplained": f"{money_of(change - moved):.2f}",
            }
            if change != moved:
                said, seen = f"{money_of(moved):.2f}", f"{money_of(change):.2f}"
                detail = f"wallet total moved {seen}, movements say {said}"
                diffs.append(Difference("balance_unexplained", None, None, currency, said, seen, detail))
        balances[currency] = entry
    return balances, diffs


@dataclass
class DayClose:
    """A stored close, as the flow reports it."""

    result: CloseResult
    check_id: int
    api_calls: Counter[str]


async def run_close(
    client: PaymentsClient,
    store: ReconciliationStore,
    day: str,
    trigger: str,
    *,
    unchecked_after: timedelta = DEFAULT_UNCHECKED_AFTER,
    lookback: timedelta = LOOKBACK,
    gate: InFlight | None = None,
) -> DayClose:
    """Read, attribute, compute and store one close (its snapshot, open items and differences)."""
    previous = await asyncio.to_thread(store.last_close)
    carried = await asyncio.to_thread(store.open_items, previous.id) if previous else []
    data = await fetch_close(client, previous, carried, store.labels_of, lookback=lookback, gate=gate)
    older = {tx.reference for tx in (*data.old_refunds, *data.old_mismatched)}
    labels = data.read.labels | await asyncio.to_thread(store.labels_of, older)
    run_labels = await asyncio.to_thread(store.run_labels)
    result = await asyncio.to_thread(
        close_day, day, previous, carried, data, labels, run_labels, unchecked_after
    )
    snapshots = {c: (v["balance"] or "0.00", v["reserved"] or "0.00") for c, v in result.balances.items()}
    check_id = await asyncio.to_thread(
        lambda: store.save_check(
            "day",
            day,
            trigger,
            result.status,
            result.summary(),
            result.differences,
            checked_at=data.as_of,
            snapshots=snapshots,
            open_items=result.open_items,
        )
    )
    return DayClose(result, check_id, data.api_calls)


@task(cache_policy=NO_CACHE, name="daily-close", **API_TASK_RETRY)
async def run_close_task(
    settings: PaymentsSettings,
    payops: PayopsSettings,
    day: str,
    trigger: str,
    unchecked_after_s: float,
    lookback_s: float,
    rate_per_s: float,
) -> DayClose:
    """One task per close: every page of the window and the re-reads, then the pandas close and the store."""
    store = await asyncio.to_thread(open_store, payops)
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, transport):
        return await run_close(
            client,
            store,
            day,
            trigger,
            unchecked_after=timedelta(seconds=unchecked_after_s),
            lookback=timedelta(seconds=lookback_s),
            gate=transport.in_flight(READS_AT_ONCE),
        )


TRANSACTION_HEADERS = [
    "id",
    "kind",
    "direction",
    "reference",
    "run",
    "status",
    "currency",
    "amount",
    "fee",
    "wallet effect",
    "reconciliation",
    "created at (UTC)",
    "completed at (UTC)",
    "parent",
    "compensation",
]
DIFFERENCE_HEADERS = ["kind", "what it means", "reference", "run", "currency", "expected", "actual", "detail"]


def _money_column(values: pd.Series) -> list[Decimal | None]:
    """Cents as two-decimal Decimals (None where missing): numbers in the xlsx, ``"12.50"`` in csv, JSON."""
    return [None if v is pd.NA or v is None else money_of(v) for v in values.astype(object).tolist()]


def _utc_column(values: pd.Series) -> list[datetime | None]:
    """Aware times as naive UTC ``datetime`` objects (None where missing): Excel date-times in the xlsx."""
    naive = values.dt.tz_convert(UTC).dt.tz_localize(None)
    return naive.to_numpy(dtype="datetime64[us]").astype(object).tolist()


def transaction_rows(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The close's transactions as report rows (`TRANSACTION_HEADERS`), built a column at a time: amounts as
    Decimal (numbers in the xlsx), times as naive UTC datetimes (Excel date-times)."""
    if not len(frame):
        return []
    text = ("id", "kind", "direction", "reference", "label", "status", "currency")
    return list(
        zip(
            *(frame[c].tolist() for c in text),
            _money_column(frame["amount_c"]),
            _money_column(frame["fee_c"]),
            _money_column(frame["effect_c"]),
            frame["recon"].tolist(),
            _utc_column(frame["created_at"]),
            _utc_column(frame["completed_at"]),
            frame["parent"].tolist(),
            frame["compensation"].tolist(),
            strict=True,
        )
    )


def difference_rows(differences: Sequence[Difference]) -> list[list[Any]]:
    from payops.tasks.ledger.run_reconciliation import KINDS

    return [
        [d.kind, KINDS.get(d.kind, ""), d.reference, d.label, d.currency, d.expected, d.actual, d.detail]
        for d in differences
    ]


def write_close_reports(
    report_dir: str, name: str, result: CloseResult, summary: dict[str, Any]
) -> dict[str, str]:
    """NAME.xlsx (transactions, summary, differences, attribution, wallet), NAME.csv and NAME.json."""
    from payops.tasks.reports.tabular_reports import write_table_reports

    attribution = [
        [
            r.label,
            r.kind,
            r.direction,
            r.currency,
            int(r.transactions),
            money_of(int(r.amount_c)),
            money_of(int(r.effect_c)),
        ]
        for r in result.attribution.itertuples(index=False)
    ]
    figures = (
        "previous_balance",
        "previous_reserved",
        "balance",
        "reserved",
        "change",
        "movements",
        "unexplained",
    )
    wallet = [  # numbers in the xlsx (finance sums them), as the attribution's amounts
        [c, *(None if v.get(k) is None else Decimal(str(v[k])) for k in figures)]
        for c, v in result.balances.items()
    ]
    rows = transaction_rows(result.transactions)
    outside = (result.transactions["label"] == OUTSIDE).tolist() if rows else []
    return write_table_reports(
        report_dir,
        name,
        TRANSACTION_HEADERS,
        rows,
        summary,
        sheet_title="transactions",
        highlight=outside,
        extra_sheets=[
            ("differences", DIFFERENCE_HEADERS, difference_rows(result.differences)),
            (
                "attribution",
                ["run", "kind", "direction", "currency", "transactions", "amount", "wallet effect"],
                attribution,
            ),
            (
                "wallet",
                [
                    "currency",
                    "previous balance",
                    "previous reserved",
                    "balance",
                    "reserved",
                    "change",
                    "movements",
                    "unexplained",
                ],
                wallet,
            ),
        ],
    )
