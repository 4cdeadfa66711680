"""Transactions and reconciliation report: every page of a window, Decimal sums, wallet and limits then.

Plain functions take a `PaymentsClient` or plain data; the thin `@task` wrapper opens the client.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from payops.connectors.payments import PaymentsClient, PaymentsSettings, Transaction
from payops.tasks.reports.tabular_reports import write_table_reports
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.retries import API_TASK_RETRY
from payops.tasks.wire.money import money
from prefect import task
from prefect.cache_policies import NO_CACHE

ACCRA = ZoneInfo("Africa/Accra")
MISMATCH_FILL = "#FFC7CE"
GROUPS = ("kind", "direction", "status", "reconciliation")
HEADERS = [
    "id",
    "kind",
    "direction",
    "reference",
    "status",
    "amount",
    "fee",
    "payer amount",
    "recipient amount",
    "currency",
    "provider",
    "settlement status",
    "reconciliation",
    "reconciliation checked at",
    "failure reason",
    "created at",
    "completed at",
    "parent",
    "compensation",
]
RECONCILIATION_COLUMN = HEADERS.index("reconciliation")


def previous_day(now: datetime, tz: ZoneInfo = ACCRA) -> tuple[datetime, datetime]:
    """[start, end) of the calendar day before `now` in `tz` (the spec's limits follow Africa/Accra days)."""
    today = now.astimezone(tz).date()
    start = datetime.combine(today - timedelta(days=1), time(0), tzinfo=tz)
    return start, start + timedelta(days=1)


@dataclass
class Filters:
    """Query filters of ``GET /v1/transactions`` (None: not filtered)."""

    kind: str | None = None
    status: str | None = None
    settlement_status: str | None = None
    reconciliation_status: str | None = None


@dataclass
class ReportData:
    """The window's transactions and the account at the time (picklable)."""

    transactions: list[Transaction]
    wallet: list[dict[str, Any]]
    limits: list[dict[str, Any]]
    taken_at: datetime
    api_calls: Counter[str] = field(default_factory=Counter)


async def fetch_report_data(
    client: PaymentsClient, start: datetime, end: datetime, filters: Filters, *, page_size: int = 100
) -> ReportData:
    """Every page of the window (slices read at once: `Transactions.read_window`) in the list's order,
    newest first, then wallet balances and limit usage."""
    items: list[Transaction] = []
    await client.transactions.read_window(
        items.extend,
        from_=start,
        to=end,
        kind=filters.kind,
        status=filters.status,
        settlement_status=filters.settlement_status,
        reconciliation_status=filters.reconciliation_status,
        limit=page_size,
    )
    items.sort(key=lambda tx: tx.created_at or end, reverse=True)  # stable: ties in the order read
    wallet = [a.model_dump(mode="json", by_alias=True) for a in await client.wallet.get()]
    limits = [lim.model_dump(mode="json", by_alias=True) for lim in await client.limits.get()]
    return ReportData(items, wallet, limits, datetime.now(ACCRA), Counter(client.api_calls))


def _reconciliation(tx: Transaction) -> str:
    return tx.reconciliation.status if tx.reconciliation else "unchecked"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _money(value: Decimal | None) -> str | None:
    return money(value) if value is not None else None


def transaction_rows(transactions: Sequence[Transaction]) -> list[list[Any]]:
    """One report line per transaction (money as two-decimal strings: exact, never float)."""
    return [
        [
            tx.id,
            tx.kind,
            tx.direction,
            tx.reference,
            tx.status,
            _money(tx.amount),
            _money(tx.fee),
            _money(tx.payer_amount),
            _money(tx.recipient_amount),
            tx.currency,
            tx.provider,
            tx.settlement_status,
            _reconciliation(tx),
            _iso(tx.reconciliation.checked_at) if tx.reconciliation else None,
            tx.failure_reason,
            _iso(tx.created_at),
            _iso(tx.completed_at),
            f"{tx.parent.type}:{tx.parent.reference}" if tx.parent else None,
            f"{tx.compensation.type}:{tx.compensation.reference}" if tx.compensation else None,
        ]
        for tx in transactions
    ]


def _group_key(tx: Transaction, group: str) -> str:
    value = _reconciliation(tx) if group == "reconciliation" else getattr(tx, group)
    return str(value or "-")


def breakdown(transactions: Sequence[Transaction], group: str) -> dict[str, dict[str, Any]]:
    """Per value of `group`: count, amount and fee sums per currency (Decimal, written as strings)."""
    counts: Counter[str] = Counter()
    amounts: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    fees: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for tx in transactions:
        key, currency = _group_key(tx, group), tx.currency or "-"
        counts[key] += 1
        amounts[key][currency] += tx.amount or Decimal(0)
        fees[key][currency] += tx.fee or Decimal(0)
    return {
        key: {
            "count": counts[key],
            "amount": {c: money(v) for c, v in sorted(amounts[key].items())},
            "fee": {c: money(v) for c, v in sorted(fees[key].items())},
        }
        for key in sorted(counts)
    }


def kind_direction_totals(transactions: Sequence[Transaction]) -> dict[str, dict[str, str]]:
    """``{"payout/out": {"GHS": "123.00"}, ...}``: amount sums per kind and direction."""
    sums: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for tx in transactions:
        sums[f"{tx.kind}/{tx.direction or '-'}"][tx.currency or "-"] += tx.amount or Decimal(0)
    return {k: {c: money(v) for c, v in sorted(cur.items())} for k, cur in sorted(sums.items())}


def breakdown_rows(summary: dict[str, Any], group: str) -> list[list[Any]]:
    rows = []
    for key, entry in summary[f"by_{group}"].items():
        for currency in entry["amount"] or {"-": "0.00"}:
            rows.append(
                [key, currency, entry["count"], entry["amount"].get(currency), entry["fee"].get(currency)]
            )
    return rows


def wallet_rows(wallet: Sequence[dict[str, Any]]) -> list[list[Any]]:
    return [
        [a.get("name"), c, v, (a.get("reserved") or {}).get(c)]
        for a in wallet
        for c, v in sorted((a.get("balances") or {}).items())
    ]


def limit_rows(limits: Sequence[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for lim in limits:
        for period in ("daily", "monthly"):
            p = lim.get(period) or {}
            rows.append(
                [
                    lim.get("currency"),
                    period,
                    p.get("limit"),
                    (p.get("in") or {}).get("used"),
                    (p.get("in") or {}).get("remaining"),
                    (p.get("out") or {}).get("used"),
                    (p.get("out") or {}).get("remaining"),
                    lim.get("perTransaction"),
                ]
            )
    return rows


def write_transactions_report(
    report_dir: str, name: str, data: ReportData, summary: dict[str, Any]
) -> dict[str, str]:
    """NAME.xlsx (transactions, summary, breakdowns, wallet, limits), NAME.csv and NAME.json.

    Mismatched reconciliations are filled red in the transactions sheet.
    """
    rows = transaction_rows(data.transactions)
    mismatched = [r[RECONCILIATION_COLUMN] == "mismatched" for r in rows]
    extra = [
        (f"by {group}", [group, "currency", "count", "amount", "fee"], breakdown_rows(summary, group))
        for group in GROUPS
    ]
    extra.append(("wallet", ["account", "currency", "balance", "reserved"], wallet_rows(data.wallet)))
    extra.append(
        (
            "limits",
            [
                "currency",
                "period",
                "limit",
                "in used",
                "in remaining",
                "out used",
                "out remaining",
                "per transaction",
            ],
            limit_rows(data.limits),
        )
    )
    return write_table_reports(
        report_dir,
        name,
        HEADERS,
        rows,
        summary,
        sheet_title="transactions",
        highlight=mismatched,
        fill=MISMATCH_FILL,
        extra_sheets=extra,
    )


@task(
    cache_policy=NO_CACHE,
    name="fetch-transactions",
    **API_TASK_RETRY,
)
async def fetch_report_data_task(
    settings: PaymentsSettings,
    start: datetime,
    end: datetime,
    filters: Filters,
    page_size: int,
    rate_per_s: float,
) -> ReportData:
    """All pages of the window (one task: tens of requests, not one task per page)."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        return await fetch_report_data(client, start, end, filters, page_size=page_size)
