"""Pre-flight: read-only checks before anything is sent (fees, balance, limits, payee names)."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from prefect import task
from prefect.cache_policies import NO_CACHE

from connectors.payments import APIStatusError, PaymentsClient, PaymentsSettings
from tasks.clients import payments_client
from tasks.intake import PayoutRow
from tasks.ratelimit import LimiterStats

ZERO = Decimal("0")


@dataclass
class CurrencyCheck:
    """Totals and headroom for one currency of the sheet."""

    currency: str
    count: int = 0
    amount: Decimal = ZERO
    fees: Decimal = ZERO
    available: Decimal | None = None
    daily_remaining: Decimal | None = None
    monthly_remaining: Decimal | None = None
    per_transaction: Decimal | None = None

    @property
    def needed(self) -> Decimal:
        return self.amount + self.fees


async def read_headroom(client: PaymentsClient) -> dict[str, CurrencyCheck]:
    """Per currency: available balance (balances minus reserved, over every wallet account) and the limits'
    per-transaction maximum and remaining daily / monthly outbound headroom."""
    wallet, limits = await asyncio.gather(client.wallet.get(), client.limits.get())
    rooms: dict[str, CurrencyCheck] = {}
    for account in wallet:
        for cur, bal in account.balances.items():
            room = rooms.setdefault(cur, CurrencyCheck(cur))
            reserved = Decimal(account.reserved.get(cur, ZERO))
            room.available = (room.available or ZERO) + Decimal(bal) - reserved
    for lim in limits:
        room = rooms.setdefault(lim.currency, CurrencyCheck(lim.currency))
        room.per_transaction = Decimal(lim.per_transaction)
        room.daily_remaining = Decimal(lim.daily.out.remaining)
        room.monthly_remaining = Decimal(lim.monthly.out.remaining)
    return rooms


@dataclass
class NameCheck:
    row: int
    destination: str
    sheet_name: str
    holder_name: str | None
    verdict: str  # match, partial, mismatch, unverified


@dataclass
class Preflight:
    currencies: dict[str, CurrencyCheck]
    fees_by_row: dict[int, Decimal]
    names: list[NameCheck] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    api_calls: Counter[str] = field(default_factory=Counter)
    limiter: LimiterStats | None = None

    @property
    def amount_total(self) -> Decimal:
        return sum((c.amount for c in self.currencies.values()), ZERO)

    @property
    def fee_total(self) -> Decimal:
        return sum((c.fees for c in self.currencies.values()), ZERO)

    @property
    def name_mismatches(self) -> list[NameCheck]:
        return [n for n in self.names if n.verdict == "mismatch"]


def name_verdict(sheet_name: str, holder: str) -> str:
    """`match` when the words agree (any order, any case), `partial` when some do, else `mismatch`."""
    a = {w for w in sheet_name.casefold().split() if w}
    b = {w for w in holder.casefold().split() if w}
    if a == b:
        return "match"
    return "partial" if a & b else "mismatch"


async def _fees(client: PaymentsClient, rows: Sequence[PayoutRow], concurrency: int) -> dict[int, Decimal]:
    """One fee quote per distinct (amount, currency, provider, destination type), shared by its rows."""
    keys = {(r.amount, r.currency, r.provider, r.destination_type) for r in rows}
    quotes: dict[tuple[Decimal, str, str, str], Decimal] = {}
    sem = asyncio.Semaphore(concurrency)

    async def quote(key: tuple[Decimal, str, str, str]) -> None:
        amount, currency, provider, dtype = key
        async with sem:
            q = await client.fee_quotes.payout(
                amount=amount, currency=currency, provider=provider, destination_type=dtype
            )
        quotes[key] = Decimal(q.fee)

    await asyncio.gather(*(quote(k) for k in keys))
    return {r.row: quotes[(r.amount, r.currency, r.provider, r.destination_type)] for r in rows}


async def _names(client: PaymentsClient, rows: Sequence[PayoutRow], concurrency: int) -> list[NameCheck]:
    """Party lookups for rows that carry a payee name and a mobile money number (one per distinct number)."""
    wanted = [r for r in rows if r.payee_name and r.destination_type == "msisdn"]
    holders: dict[tuple[str, str], str | None] = {}
    sem = asyncio.Semaphore(concurrency)

    async def lookup(provider: str, msisdn: str) -> None:
        async with sem:
            try:
                holders[(provider, msisdn)] = (
                    await client.party_lookups.lookup(provider=provider, msisdn=msisdn)
                ).name
            except APIStatusError:
                holders[(provider, msisdn)] = None

    await asyncio.gather(*(lookup(p, m) for p, m in {(r.provider, r.destination) for r in wanted}))
    checks = []
    for r in wanted:
        holder = holders[(r.provider, r.destination)]
        verdict = "unverified" if holder is None else name_verdict(r.payee_name or "", holder)
        checks.append(NameCheck(r.row, r.destination, r.payee_name or "", holder, verdict))
    return checks


async def run_preflight(
    client: PaymentsClient,
    rows: Sequence[PayoutRow],
    *,
    check_names: bool = True,
    block_on_name_mismatch: bool = False,
    concurrency: int = 8,
) -> Preflight:
    """All read-only checks; `problems` lists what would make the run fail if sent as it is."""
    fees = await _fees(client, rows, concurrency)
    currencies: dict[str, CurrencyCheck] = defaultdict(lambda: CurrencyCheck(""))
    largest: dict[str, PayoutRow] = {}
    for r in rows:
        c = currencies[r.currency]
        c.currency = r.currency
        c.count += 1
        c.amount += r.amount
        c.fees += fees[r.row]
        if r.currency not in largest or r.amount > largest[r.currency].amount:
            largest[r.currency] = r
    for cur, room in (await read_headroom(client)).items():
        if cur in currencies:
            c = currencies[cur]
            c.available, c.per_transaction = room.available, room.per_transaction
            c.daily_remaining, c.monthly_remaining = room.daily_remaining, room.monthly_remaining
    pf = Preflight(dict(currencies), fees)
    for cur, c in pf.currencies.items():
        if c.available is None or c.available < c.needed:
            pf.problems.append(
                f"{cur}: wallet has {c.available or ZERO} available, the sheet needs {c.needed} "
                f"(amounts {c.amount} + fees {c.fees})"
            )
        if c.per_transaction is None:
            pf.problems.append(f"{cur}: no limits are set for this currency, so no payment can be made")
            continue
        big = largest[cur]
        if big.amount > c.per_transaction:
            over = sum(1 for r in rows if r.currency == cur and r.amount > c.per_transaction)
            pf.problems.append(
                f"{cur}: {over} row(s) exceed the per-transaction limit {c.per_transaction} "
                f"(largest: row {big.row}, {big.amount})"
            )
        for period, remaining in (("daily", c.daily_remaining), ("monthly", c.monthly_remaining)):
            if remaining is not None and remaining < c.needed:
                pf.problems.append(
                    f"{cur}: {period} outbound headroom {remaining} is below the sheet's {c.needed}"
                )
    if check_names:
        pf.names = await _names(client, rows, concurrency)
        mismatches = pf.name_mismatches
        if mismatches:
            msg = (
                f"{len(mismatches)} payee name(s) do not match the account holder (rows "
                + ", ".join(str(n.row) for n in mismatches[:10])
                + ("…)" if len(mismatches) > 10 else ")")
            )
            (pf.problems if block_on_name_mismatch else pf.notes).append(msg)
    return pf


@task(cache_policy=NO_CACHE, name="preflight", retries=2, retry_delay_seconds=2)
async def preflight_task(
    settings: PaymentsSettings,
    rows: list[PayoutRow],
    check_names: bool,
    block_on_name_mismatch: bool,
    rate_per_s: float,
) -> Preflight:
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, transport):
        pf = await run_preflight(
            client, rows, check_names=check_names, block_on_name_mismatch=block_on_name_mismatch
        )
        pf.api_calls = Counter(client.api_calls)
        pf.limiter = transport.stats
        return pf
