"""Bulk airtime and data purchases: the utility sheet, its validation, quotes, purchases and polling.

Plain functions take a `PaymentsClient` (or plain data); the thin `@task` wrappers open the client.

The sheet (xlsx/xlsm/csv) is read with the payout intake's safe readers (size, zip-bomb, formula and
encoding checks; `tasks.intake`) and phone numbers go through `tasks.intake.phones.normalise_msisdn`. Columns:
``msisdn`` (beneficiary), ``product`` (a product id) or ``network`` + ``category``, ``amount`` (blank: a fixed
product's price), optional ``currency`` (GHS only), ``funding`` (``wallet``, the default, or
``collection``) with ``payer provider`` (mtn, telecel) and ``payer msisdn`` for collections.

Exactly once: row R of label L is bought with the reference ``row_reference(L, R)`` and an Idempotency-Key
fixed by the label, the row and the body; a re-run replays (same key) or reads the purchase back
(``duplicate_reference``): nothing is bought twice. ``outcome_unknown`` and ``refund_failed`` are waited on
and reported, never bought again under a new reference.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import partial
from typing import Any

from payops.connectors.payments import (
    APIConnectionError,
    APIStatusError,
    PaymentsClient,
    PaymentsSettings,
    UtilityProduct,
    UtilityPurchase,
    UtilityPurchaseRequest,
)
from payops.connectors.payments.models import (
    UTILITY_PURCHASE_AWAITING_STATUSES,
    UTILITY_PURCHASE_FAILED_STATUSES,
    UTILITY_PURCHASE_FINAL_STATUSES,
)
from payops.tasks.intake import IntakeError, IntakeOptions, IntakeResult, read_raw_sheet
from payops.tasks.intake.amounts import CellError, parse_amount
from payops.tasks.intake.columns import header_key
from payops.tasks.intake.phones import normalise_msisdn
from payops.tasks.intake.raw import RawSheet
from payops.tasks.payouts.poll_loop import PURCHASE_BACKOFF, Backoff, PollRounds, poll_until
from payops.tasks.rows.payout_row import RowIssue
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.retries import API_TASK_RETRY
from payops.tasks.wire.money import money
from payops.tasks.wire.references import purchase_idempotency_key, row_reference
from prefect import task
from prefect.cache_policies import NO_CACHE

log = logging.getLogger(__name__)

CURRENCY = "GHS"
PAYER_PROVIDERS = frozenset({"mtn", "telecel"})
CHUNK_SIZE = 50

COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "msisdn": ("msisdn", "beneficiary", "beneficiary msisdn", "phone", "phone number", "mobile", "number"),
    "product": ("product", "product id", "productid"),
    "network": ("network",),
    "category": ("category",),
    "amount": ("amount", "value"),
    "currency": ("currency",),
    "funding": ("funding", "funding type", "pay from"),
    "payer_provider": ("payer provider", "payer network"),
    "payer_msisdn": ("payer msisdn", "payer phone", "payer number", "payer"),
}
_FIELD_OF = {header_key(a): f for f, aliases in COLUMN_ALIASES.items() for a in aliases}


# --------------------------------------------------------------------------------------------------
# Reading the sheet (cells as text: tasks.intake.read_raw_sheet, with the payout intake's safety checks)
# --------------------------------------------------------------------------------------------------


def map_utility_columns(columns: Sequence[str]) -> dict[str, int]:
    """Field → column index for the headers the sheet has; IntakeError for missing or doubled columns."""
    found: dict[str, int] = {}
    for i, header in enumerate(columns):
        name = _FIELD_OF.get(header_key(header))
        if name is None:
            continue
        if name in found:
            raise IntakeError(f"two columns mean {name!r}: {columns[found[name]]!r} and {header!r}; keep one")
        found[name] = i
    if "msisdn" not in found:
        raise IntakeError("the sheet needs an 'msisdn' column (the number to top up)")
    if "product" not in found and not {"network", "category"} <= set(found):
        raise IntakeError("the sheet needs a 'product' column, or 'network' and 'category' columns")
    return found


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProductInfo:
    """The fields of a utility product that validation and reports need (picklable)."""

    id: str
    category: str
    network: str
    name: str
    kind: str
    currency: str
    delivery: str
    price: Decimal | None = None
    min: Decimal | None = None
    max: Decimal | None = None

    @classmethod
    def of(cls, p: UtilityProduct) -> ProductInfo:
        return cls(p.id, p.category, p.network, p.name, p.kind, p.currency, p.delivery, p.price, p.min, p.max)

    def accepts(self, amount: Decimal) -> bool:
        if self.kind == "fixed":
            return self.price is not None and amount == self.price
        low = self.min if self.min is not None else Decimal("0.01")
        return low <= amount and (self.max is None or amount <= self.max)

    def range_text(self) -> str:
        if self.kind == "fixed":
            return f"the price {money(self.price)}" if self.price is not None else "its price"
        return f"{money(self.min or Decimal('0.01'))} to {money(self.max) if self.max else 'any amount'}"


@dataclass(frozen=True)
class UtilityRow:
    """A validated purchase line."""

    row: int
    msisdn: str
    product_id: str
    amount: Decimal
    funding: str = "wallet"
    payer_provider: str | None = None
    payer_msisdn: str | None = None
    currency: str = CURRENCY

    def canonical(self) -> tuple[object, ...]:
        return (
            self.row,
            self.msisdn,
            self.product_id,
            self.amount,
            self.funding,
            self.payer_provider,
            self.payer_msisdn,
        )


@dataclass
class UtilitySheet:
    """What one sheet yielded: valid rows, located problems, and the original table for reports."""

    source: str
    sheet: str | None
    rows: list[UtilityRow]
    errors: list[RowIssue]
    warnings: list[RowIssue]
    columns: list[str]
    table: list[dict[str, str]]
    rows_total: int

    @property
    def rows_invalid(self) -> int:
        return len({e.row for e in self.errors})

    def as_intake_result(self) -> IntakeResult:
        """The shape `tasks.intake.write_validation_report` writes."""
        return IntakeResult(
            source=self.source,
            sheet=self.sheet,
            content_sha256="",
            errors=self.errors,
            warnings=self.warnings,
            rows_total=self.rows_total,
            columns=self.columns,
            table=self.table,
        )


def _resolve_product(
    pid: str, network: str, category: str, amount: Decimal | None, products: Sequence[ProductInfo]
) -> tuple[ProductInfo | None, str, str]:
    """(product, column at fault, message) — the product when found, else where the problem is."""
    if pid:
        by_id = {p.id.casefold(): p for p in products}
        product = by_id.get(pid.casefold())
        if product is None:
            return None, "product", f"unknown product {pid!r}; see GET /v1/utility-products"
        if network and network.casefold() != product.network.casefold():
            return None, "network", f"product {product.id} is on {product.network}, not {network}"
        if category and category.casefold() != product.category.casefold():
            return None, "category", f"product {product.id} is {product.category}, not {category}"
        return product, "", ""
    if not network or not category:
        missing = "network" if not network else "category"
        return None, missing, f"name a product id, or both network and category ({missing} is blank)"
    found = [
        p
        for p in products
        if p.network.casefold() == network.casefold() and p.category.casefold() == category.casefold()
    ]
    if not found:
        return None, "network", f"no {category} product on {network}"
    if len(found) > 1 and amount is not None:
        fitting = [p for p in found if p.accepts(amount)]
        found = fitting or found
    if len(found) > 1:
        ids = ", ".join(sorted(p.id for p in found))
        return None, "product", f"{network} {category} has several products ({ids}); name one in 'product'"
    return found[0], "", ""


@dataclass
class _RowCells:
    """One data row's cells by field, and the problems found in it (located by row and column)."""

    raw: RawSheet
    cols: dict[str, int]
    pos: int
    number: int
    problems: list[RowIssue] = field(default_factory=list)

    def __call__(self, name: str) -> str:
        return self.raw.data[self.cols[name]][self.pos] if name in self.cols else ""

    def column(self, name: str) -> str:
        return self.raw.columns[self.cols[name]] if name in self.cols else name.replace("_", " ")

    def issue(self, name: str, message: str) -> RowIssue:
        return RowIssue(self.number, self.column(name), self(name), message)

    def problem(self, name: str, message: str) -> None:
        self.problems.append(self.issue(name, message))

    def numeric(self, name: str) -> bool:
        return name in self.cols and self.pos in self.raw.numeric.get(self.cols[name], set())


def _amount(cell: _RowCells) -> Decimal | None:
    if not cell("amount"):
        return None
    try:
        amount, hint = parse_amount(cell("amount"), numeric_cell=cell.numeric("amount"))
    except CellError as exc:
        cell.problem("amount", str(exc))
        return None
    if hint and hint != CURRENCY:
        cell.problem("amount", f"only {CURRENCY} is sold, the amount says {hint}")
    return amount


def _product_and_amount(
    cell: _RowCells, products: Sequence[ProductInfo], warnings: list[RowIssue]
) -> tuple[ProductInfo | None, Decimal | None]:
    """The row's product (by id, or network + category) and amount (blank: a fixed product's price)."""
    amount = _amount(cell)
    product, fault, message = _resolve_product(
        cell("product"), cell("network"), cell("category"), amount, products
    )
    if product is None:
        cell.problem(
            fault if fault in cell.cols else ("product" if "product" in cell.cols else "network"), message
        )
        return None, amount
    if product.currency != CURRENCY:
        cell.problem(
            "product", f"product {product.id} is sold in {product.currency}; only {CURRENCY} is sold"
        )
    if amount is None and not cell("amount"):
        if product.kind == "fixed" and product.price is not None:
            amount = product.price
        else:
            cell.problem("amount", f"the amount is required for {product.id} ({product.range_text()})")
    if amount is not None and not product.accepts(amount):
        cell.problem("amount", f"{money(amount)} is outside {product.id}'s range: {product.range_text()}")
    if product.delivery == "unverified":
        where = "product" if "product" in cell.cols else "network"
        warnings.append(cell.issue(where, f"{product.id}: no purchase has been confirmed delivered yet"))
    return product, amount


def _funding(cell: _RowCells, cc: str) -> tuple[str, str | None, str | None]:
    funding = (cell("funding") or "wallet").casefold()
    if funding not in {"wallet", "collection"}:
        cell.problem("funding", "funding must be 'wallet' or 'collection'")
        return funding, None, None
    if funding == "wallet":
        return funding, None, None
    provider = cell("payer_provider").casefold()
    if provider not in PAYER_PROVIDERS:
        cell.problem(
            "payer_provider", f"a collection needs a payer provider: {', '.join(sorted(PAYER_PROVIDERS))}"
        )
    payer = None
    try:
        payer = normalise_msisdn(cell("payer_msisdn"), cc)
    except CellError as exc:
        cell.problem("payer_msisdn", f"payer: {exc}")
    return funding, provider, payer


def validate_utility_sheet(
    raw: RawSheet, source: str, products: Sequence[ProductInfo], options: IntakeOptions | None = None
) -> UtilitySheet:
    """Validate every row against the product list; each problem is located by row and column."""
    options = options or IntakeOptions()
    cols = map_utility_columns(raw.columns)
    errors: list[RowIssue] = []
    warnings: list[RowIssue] = []
    rows: list[UtilityRow] = []
    seen: dict[tuple[str, str, Decimal], int] = {}
    cc = options.default_country_code
    for pos, number in enumerate(raw.row_numbers):
        cell = _RowCells(raw, cols, pos, number)
        msisdn = ""
        try:
            msisdn = normalise_msisdn(cell("msisdn"), cc)
        except CellError as exc:
            cell.problem("msisdn", str(exc))
        product, amount = _product_and_amount(cell, products, warnings)
        if (cell("currency").upper() or CURRENCY) != CURRENCY:
            cell.problem("currency", f"only {CURRENCY} is sold")
        funding, payer_provider, payer_msisdn = _funding(cell, cc)
        errors += cell.problems
        if cell.problems or product is None or amount is None:
            continue
        key = (msisdn, product.id, amount)
        if key in seen:
            warnings.append(cell.issue("msisdn", f"same purchase as row {seen[key]}; both will be bought"))
        seen.setdefault(key, number)
        rows.append(UtilityRow(number, msisdn, product.id, amount, funding, payer_provider, payer_msisdn))
    keys = partial(zip, [*raw.columns, "__row__"])
    table = list(map(dict, map(keys, zip(*raw.data, map(str, raw.row_numbers), strict=True))))
    return UtilitySheet(source, raw.sheet, rows, errors, warnings, raw.columns, table, len(raw.row_numbers))


# --------------------------------------------------------------------------------------------------
# References, keys, requests
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PurchaseOrder:
    """One purchase to send: the row, its request body and its fixed Idempotency-Key."""

    row: int
    reference: str
    idempotency_key: str
    body: dict[str, Any]


def purchase_request(row: UtilityRow, reference: str) -> UtilityPurchaseRequest:
    funding: dict[str, Any] = {"type": row.funding}
    if row.funding == "collection":
        funding["payer"] = {"provider": row.payer_provider, "msisdn": row.payer_msisdn}
    return UtilityPurchaseRequest(
        reference=reference,
        product_id=row.product_id,
        amount=row.amount,
        currency=row.currency,
        beneficiary={"msisdn": row.msisdn},
        funding=funding,
    )


def purchase_orders(rows: Sequence[UtilityRow], label: str) -> list[PurchaseOrder]:
    """A pure function of the rows and the label: the same sheet and label always send the same bytes."""
    orders = []
    for row in rows:
        reference = row_reference(label, row.row)
        body = purchase_request(row, reference).to_wire()
        orders.append(PurchaseOrder(row.row, reference, purchase_idempotency_key(label, row.row, body), body))
    return orders


def chunks(orders: Sequence[PurchaseOrder], size: int = CHUNK_SIZE) -> list[list[PurchaseOrder]]:
    return [list(orders[i : i + size]) for i in range(0, len(orders), size)]


# --------------------------------------------------------------------------------------------------
# Quotes, purchases, polling
# --------------------------------------------------------------------------------------------------


@dataclass
class Quote:
    product_id: str
    amount: Decimal
    fee: Decimal | None = None
    gross: Decimal | None = None
    error_code: str | None = None
    error_message: str | None = None


@dataclass
class Quotes:
    """Fee quotes per distinct (product, amount), and the wallet's available GHS at the time."""

    by_key: dict[tuple[str, Decimal], Quote]
    wallet_available: Decimal | None = None
    api_calls: Counter[str] = field(default_factory=Counter)


async def quote_all(client: PaymentsClient, keys: Sequence[tuple[str, Decimal]]) -> Quotes:
    """One quote per distinct product and amount (a 4xx becomes the quote's error, not an exception)."""
    result = Quotes({})
    for product_id, amount in dict.fromkeys(keys):
        try:
            q = await client.utilities.fee_quote(product_id=product_id, amount=amount, currency=CURRENCY)
            result.by_key[(product_id, amount)] = Quote(product_id, amount, q.fee, q.gross)
        except APIStatusError as exc:
            if exc.transient:
                raise
            result.by_key[(product_id, amount)] = Quote(product_id, amount, None, None, exc.code, exc.message)
    accounts = await client.wallet.get()
    result.wallet_available = (
        sum((Decimal(a.balances.get(CURRENCY, 0)) for a in accounts), Decimal(0)) if accounts else None
    )
    result.api_calls = Counter(client.api_calls)
    return result


@dataclass
class PurchaseOutcome:
    """What happened to one row's purchase."""

    row: int
    reference: str
    submission: str = "not sent"  # accepted, refused, error, conflict, not sent
    status: str | None = None
    fee: Decimal | None = None
    gross: Decimal | None = None
    failure_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    created_at: datetime | None = None

    @property
    def final(self) -> bool:
        return self.submission != "accepted" or self.status in UTILITY_PURCHASE_FINAL_STATUSES

    def update(self, purchase: UtilityPurchase) -> None:
        self.status = purchase.status
        self.fee = purchase.fee if purchase.fee is not None else self.fee
        self.gross = purchase.gross if purchase.gross is not None else self.gross
        self.failure_reason = purchase.failure_reason
        self.created_at = purchase.created_at or self.created_at


def _mismatch(order: PurchaseOrder, purchase: UtilityPurchase) -> str | None:
    """Why a purchase read back under our reference is not the one this row asks for (None: it is)."""
    product = purchase.product.id if purchase.product else None
    msisdn = purchase.beneficiary.msisdn if purchase.beneficiary else None
    wanted = (order.body["productId"], Decimal(order.body["amount"]), order.body["beneficiary"]["msisdn"])
    got = (product, purchase.amount, msisdn)
    if None in got or got == wanted:
        return None
    return (
        f"reference {order.reference} was used for another purchase ({product} {money(purchase.amount)} "
        f"to {msisdn}); was the sheet edited and re-run with the same label? nothing was bought"
    )


async def purchase_one(client: PaymentsClient, order: PurchaseOrder) -> PurchaseOutcome:
    """Send one purchase (replay-safe); refusals and lasting errors become the outcome, not exceptions."""
    outcome = PurchaseOutcome(order.row, order.reference)
    try:
        purchase = await client.utilities.purchase_or_get(
            UtilityPurchaseRequest.model_validate(order.body), idempotency_key=order.idempotency_key
        )
    except APIStatusError as exc:
        outcome.submission = "error" if exc.transient else "refused"
        outcome.error_code, outcome.error_message = exc.code, exc.message
        return outcome
    except APIConnectionError as exc:
        outcome.submission, outcome.error_code, outcome.error_message = "error", "connection", str(exc)
        return outcome
    conflict = _mismatch(order, purchase)
    if conflict:
        outcome.submission, outcome.error_code, outcome.error_message = (
            "conflict",
            "reference_conflict",
            conflict,
        )
        return outcome
    outcome.submission = "accepted"
    outcome.update(purchase)
    return outcome


async def purchase_chunk(
    client: PaymentsClient, orders: Sequence[PurchaseOrder], concurrency: int = 8
) -> list[PurchaseOutcome]:
    """The chunk's purchases, at most `concurrency` in flight."""
    sem = asyncio.Semaphore(concurrency)

    async def one(order: PurchaseOrder) -> PurchaseOutcome:
        async with sem:
            return await purchase_one(client, order)

    return list(await asyncio.gather(*(one(o) for o in orders)))


@dataclass
class PollResult(PollRounds):
    outcomes: dict[str, PurchaseOutcome]


async def poll_purchases(
    client: PaymentsClient,
    outcomes: dict[str, PurchaseOutcome],
    *,
    deadline_s: float,
    since: datetime | None = None,
    concurrency: int = 8,
    backoff: Backoff = PURCHASE_BACKOFF,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> PollResult:
    """Refresh accepted purchases until final (delivered, failed, refunded) or the deadline.

    Many pending: one ``GET /v1/transactions?kind=utility`` listing refreshes them page by page; the rest
    (and small remainders) are read by reference. ``outcome_unknown``/``refund_failed`` stay pending.
    """
    result = PollResult(outcomes)
    sem = asyncio.Semaphore(concurrency)

    async def read(ref: str) -> None:
        async with sem:
            result.outcomes[ref].update(await client.utilities.get_purchase(ref))

    def pending() -> list[str]:
        return [r for r, o in result.outcomes.items() if not o.final]

    async def refresh() -> None:
        waiting = pending()
        if len(waiting) > 20 and since is not None:
            wanted = set(waiting)
            async for tx in client.transactions.iterate(kind="utility", from_=since, limit=100):
                if tx.reference in wanted:
                    result.outcomes[tx.reference].status = tx.status
                    result.outcomes[tx.reference].failure_reason = tx.failure_reason
                    wanted.discard(tx.reference)
            waiting = sorted(wanted)
        await asyncio.gather(*(read(r) for r in waiting))

    progress = await poll_until(refresh, lambda: not pending(), deadline_s, backoff, sleep=sleep)
    result.rounds, result.deadline_reached = progress.rounds, progress.deadline_reached
    result.api_calls = Counter(client.api_calls)
    return result


# --------------------------------------------------------------------------------------------------
# Prefect tasks (thin)
# --------------------------------------------------------------------------------------------------


@task(cache_policy=NO_CACHE, name="read-utility-sheet")
def read_utility_sheet_task(source: str, options: IntakeOptions) -> RawSheet:
    """Read the sheet's cells as text (safety checks included)."""
    return read_raw_sheet(source, options)


@task(
    cache_policy=NO_CACHE,
    name="utility-products",
    **API_TASK_RETRY,
)
async def products_task(
    settings: PaymentsSettings, rate_per_s: float
) -> tuple[list[ProductInfo], Counter[str]]:
    """GET /v1/utility-products."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        return [ProductInfo.of(p) for p in await client.utilities.products()], Counter(client.api_calls)


@task(
    cache_policy=NO_CACHE,
    name="utility-fee-quotes",
    **API_TASK_RETRY,
)
async def quotes_task(
    settings: PaymentsSettings, keys: list[tuple[str, Decimal]], rate_per_s: float
) -> Quotes:
    """A fee quote per distinct product and amount, and the wallet balance."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        return await quote_all(client, keys)


@task(
    cache_policy=NO_CACHE,
    name="buy-utility-chunk",
    **API_TASK_RETRY,
    task_run_name="buy-utility-chunk-{index}",
)
async def purchase_chunk_task(
    settings: PaymentsSettings, index: int, orders: list[PurchaseOrder], concurrency: int, rate_per_s: float
) -> tuple[list[PurchaseOutcome], Counter[str]]:
    """One chunk of purchases (stable references and keys: a task retry replays, never buys twice)."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        return await purchase_chunk(client, orders, concurrency), Counter(client.api_calls)


@task(
    cache_policy=NO_CACHE,
    name="poll-utility-purchases",
    **API_TASK_RETRY,
)
async def poll_purchases_task(
    settings: PaymentsSettings,
    outcomes: dict[str, PurchaseOutcome],
    since: datetime | None,
    deadline_s: float,
    rate_per_s: float,
) -> PollResult:
    """Poll accepted purchases to final (bounded deadline, growing interval)."""
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, _t):
        return await poll_purchases(client, outcomes, deadline_s=deadline_s, since=since)


# --------------------------------------------------------------------------------------------------
# Report rows
# --------------------------------------------------------------------------------------------------

RESULT_COLUMNS = [
    "Reference (sent)",
    "Product",
    "Amount (sent)",
    "Funding",
    "Fee",
    "Gross",
    "Submission",
    "Purchase status",
    "Failure reason",
    "Error code",
    "Error message",
    "Created at",
]


def result_headers(columns: Sequence[str]) -> list[str]:
    taken = set(RESULT_COLUMNS)
    return [f"{c} (sheet)" if c in taken else c for c in columns] + RESULT_COLUMNS


def result_rows(
    sheet: UtilitySheet, outcomes: dict[int, PurchaseOutcome], quotes: dict[tuple[str, Decimal], Quote]
) -> list[list[Any]]:
    """The sheet's own cells and what happened, one line per sheet row."""
    by_row = {r.row: r for r in sheet.rows}
    rows = []
    for rec in sheet.table:
        number = int(rec["__row__"])
        row = by_row.get(number)
        o = outcomes.get(number)
        q = quotes.get((row.product_id, row.amount)) if row else None
        fee = o.fee if o and o.fee is not None else (q.fee if q else None)
        gross = o.gross if o and o.gross is not None else (q.gross if q else None)
        rows.append(
            [rec.get(c, "") for c in sheet.columns]
            + [
                o.reference if o else None,
                row.product_id if row else None,
                money(row.amount) if row else None,
                row.funding if row else None,
                money(fee) if fee is not None else None,
                money(gross) if gross is not None else None,
                o.submission if o else ("invalid" if row is None else "not sent"),
                o.status if o else None,
                o.failure_reason if o else None,
                o.error_code if o else None,
                o.error_message if o else None,
                o.created_at.isoformat() if o and o.created_at else None,
            ]
        )
    return rows


def needs_attention(o: PurchaseOutcome | None) -> bool:
    """The one test of a purchase row needing a person: invalid or not sent (no outcome), refused, failed,
    awaiting the service or not final (the artifact and the report's highlight read it)."""
    return (
        o is None
        or o.submission != "accepted"
        or o.status in UTILITY_PURCHASE_FAILED_STATUSES
        or o.status in UTILITY_PURCHASE_AWAITING_STATUSES
        or not o.final
    )


def canonical_rows(rows: Sequence[UtilityRow]) -> list[tuple[object, ...]]:
    return [r.canonical() for r in rows]
