"""Pre-flight: read-only checks before anything is sent (fees, balance, limits, payee names)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from payops.connectors.payments import APIStatusError, NotFoundError, PaymentsClient, PaymentsSettings
from payops.store import SchemaBehind, open_database
from payops.store.cache import NAMES, QUOTES, Cached, LookupCache, cache_key
from payops.store.settings import PayopsSettings
from payops.tasks.intake import PayoutRow
from payops.tasks.payouts import fee_pricing
from payops.tasks.payouts.fee_pricing import FeeRange, PriceKey
from payops.tasks.payouts.lookup_cache import CachePolicy, through_cache
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.inflight import DEFAULT_CAP
from payops.tasks.runtime.ratelimit import LimiterStats
from payops.tasks.runtime.retries import API_TASK_RETRY
from prefect import task
from prefect.cache_policies import NO_CACHE
from sqlalchemy.exc import SQLAlchemyError

ZERO = Decimal("0")
log = logging.getLogger(__name__)


@dataclass
class CurrencyCheck:
    """Totals and headroom for one currency of the sheet."""

    currency: str
    count: int = 0
    amount: Decimal = ZERO
    fees: Decimal = ZERO  # the highest the fees can be (exact where every row's fee is known)
    fees_low: Decimal = ZERO
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


@dataclass(slots=True)
class NameCheck:
    row: int
    destination: str
    sheet_name: str
    holder_name: str | None
    verdict: str  # match, partial, mismatch, unverified


@dataclass
class Preflight:
    currencies: dict[str, CurrencyCheck]
    fees_by_row: dict[int, FeeRange]
    names: list[NameCheck] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    api_calls: Counter[str] = field(default_factory=Counter)
    limiter: LimiterStats | None = None
    lookups: Counter[str] = field(default_factory=Counter)  # cached, fresh, failed
    quotes: Counter[str] = field(default_factory=Counter)

    def cache_counts(self) -> dict[str, dict[str, int]]:
        """Cached / fresh / failed answers, for name lookups and fee quotes."""
        keys = ("cached", "fresh", "failed")
        return {
            "name_lookups": {k: self.lookups[k] for k in keys},
            "fee_quotes": {k: self.quotes[k] for k in keys},
        }

    def release_row_detail(self) -> list[NameCheck]:
        """Drop what the run no longer needs once the pre-flight is reported and its approved fees recorded
        (fees by row); returns every name check, for the report's holder name and name-check columns."""
        self.fees_by_row = {}
        return self.names

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


async def _lookup(client: PaymentsClient, number: tuple[str, str]) -> Cached | Exception:
    """The holder name on a number; "no such account" is an answer worth keeping briefly, other errors not."""
    provider, msisdn = number
    try:
        return Cached((await client.party_lookups.lookup(provider=provider, msisdn=msisdn)).name, True)
    except NotFoundError:
        return Cached(None, False)
    except APIStatusError as exc:
        return exc


async def _quote(client: PaymentsClient, key: PriceKey) -> Cached | Exception:
    amount, currency, provider, dtype = key
    try:
        q = await client.fee_quotes.payout(
            amount=amount, currency=currency, provider=provider, destination_type=dtype
        )
    except APIStatusError as exc:
        return exc
    return Cached(str(q.fee), True)


@dataclass
class _Asker:
    """The pre-flight's read-only calls: through the cache, deduplicated, as many at once as `gate` admits."""

    client: PaymentsClient
    cache: LookupCache | None
    policy: CachePolicy
    gate: AbstractAsyncContextManager[Any]
    lookups: Counter[str] = field(default_factory=Counter)
    quotes: Counter[str] = field(default_factory=Counter)

    async def quote_many(self, keys: list[PriceKey]) -> dict[PriceKey, Decimal | Exception]:
        inputs = {cache_key("payout-fee", *k): k for k in keys}
        answers, tally = await through_cache(
            self.cache,
            QUOTES,
            inputs,
            lambda k: _quote(self.client, k),
            self.policy.for_quote,
            self.gate,
        )
        self.quotes.update(tally)
        out: dict[PriceKey, Decimal | Exception] = {}
        for h, key in inputs.items():
            a = answers[h]
            out[key] = Decimal(a.value) if isinstance(a, Cached) and a.ok and a.value else _refused(a)
        return out

    async def names(self, rows: Sequence[PayoutRow]) -> list[NameCheck]:
        """Holder names for rows that carry a payee name and a mobile money number (one per number)."""
        wanted = [r for r in rows if r.payee_name and r.destination_type == "msisdn"]
        inputs = {cache_key("msisdn", r.provider, r.destination): (r.provider, r.destination) for r in wanted}
        answers, tally = await through_cache(
            self.cache,
            NAMES,
            inputs,
            lambda n: _lookup(self.client, n),
            self.policy.for_name,
            self.gate,
        )
        self.lookups.update(tally)
        checks = []
        for r in wanted:
            a = answers[cache_key("msisdn", r.provider, r.destination)]
            holder = a.value if isinstance(a, Cached) and a.ok else None
            verdict = "unverified" if holder is None else name_verdict(r.payee_name or "", holder)
            checks.append(NameCheck(r.row, r.destination, r.payee_name or "", holder, verdict))
        return checks


def _refused(answer: Cached | Exception) -> Exception:
    return answer if isinstance(answer, Exception) else ValueError("the fee quote carried no fee")


def _check_currencies(
    rows: Sequence[PayoutRow], fees: dict[int, FeeRange], rooms: dict[str, CurrencyCheck]
) -> tuple[dict[str, CurrencyCheck], list[str], set[str]]:
    """Totals and headroom per currency with each row's highest possible fee; problems, and the currencies
    whose problems might vanish with exact fees."""
    currencies: dict[str, CurrencyCheck] = {}
    largest: dict[str, PayoutRow] = {}
    for r in rows:
        c = currencies.setdefault(r.currency, CurrencyCheck(r.currency))
        c.count += 1
        c.amount += r.amount
        c.fees += fees[r.row].high
        c.fees_low += fees[r.row].low
        if r.currency not in largest or r.amount > largest[r.currency].amount:
            largest[r.currency] = r
    for cur, room in rooms.items():
        if cur in currencies:
            c = currencies[cur]
            c.available, c.per_transaction = room.available, room.per_transaction
            c.daily_remaining, c.monthly_remaining = room.daily_remaining, room.monthly_remaining
    problems: list[str] = []
    refinable: set[str] = set()
    for cur, c in currencies.items():
        if c.available is None or c.available < c.needed:
            problems.append(
                f"{cur}: wallet has {c.available or ZERO} available, the sheet needs {c.needed} "
                f"(amounts {c.amount} + fees {c.fees})"
            )
            if c.available is not None and c.available >= c.amount + c.fees_low:
                refinable.add(cur)
        if c.per_transaction is None:
            problems.append(f"{cur}: no limits are set for this currency, so no payment can be made")
            continue
        big = largest[cur]
        if big.amount > c.per_transaction:
            over = sum(1 for r in rows if r.currency == cur and r.amount > c.per_transaction)
            problems.append(
                f"{cur}: {over} row(s) exceed the per-transaction limit {c.per_transaction} "
                f"(largest: row {big.row}, {big.amount})"
            )
        for period, remaining in (("daily", c.daily_remaining), ("monthly", c.monthly_remaining)):
            if remaining is not None and remaining < c.needed:
                problems.append(
                    f"{cur}: {period} outbound headroom {remaining} is below the sheet's {c.needed}"
                )
                if remaining >= c.amount + c.fees_low:
                    refinable.add(cur)
    return currencies, problems, refinable


async def run_preflight(
    client: PaymentsClient,
    rows: Sequence[PayoutRow],
    *,
    check_names: bool = True,
    block_on_name_mismatch: bool = False,
    concurrency: int = 16,
    exact_fees: bool = False,
    cache: LookupCache | None = None,
    policy: CachePolicy | None = None,
    gate: AbstractAsyncContextManager[Any] | None = None,
) -> Preflight:
    """All read-only checks; `problems` lists what would make the run fail if sent as it is.

    Lookups and quotes go as `gate` admits them (the task's: sized by the service's pace and round trip,
    `tasks.runtime.inflight`), or at most `concurrency` at a time without one.
    Fees are bracketed on a fixed amount grid (`tasks.payouts.fee_pricing`: its assumption is stated there)
    unless `exact_fees`; a currency whose checks fail only because of the bracket is quoted amount by amount.
    """
    asker = _Asker(client, cache, policy or CachePolicy(), gate or asyncio.Semaphore(concurrency))
    price = fee_pricing.exact_fees if exact_fees else fee_pricing.bracketed_fees
    fees, rooms, names = await asyncio.gather(
        price(asker.quote_many, rows),
        read_headroom(client),
        asker.names(rows) if check_names else _no_names(),
    )
    currencies, problems, refinable = _check_currencies(rows, fees, rooms)
    if refinable:
        inexact = [r for r in rows if r.currency in refinable and not fees[r.row].exact]
        fees.update(await fee_pricing.exact_fees(asker.quote_many, inexact))
        currencies, problems, _ = _check_currencies(rows, fees, rooms)
    pf = Preflight(currencies, fees, names, problems)
    pf.lookups, pf.quotes = asker.lookups, asker.quotes
    bounded = sum(1 for f in fees.values() if not f.exact)
    if bounded:
        pf.notes.append(
            f"fees are an upper bound for {bounded} row(s) (priced on the fee grid; "
            "each payout's own fee comes back when it is sent)"
        )
    mismatches = pf.name_mismatches
    if mismatches:
        msg = (
            f"{len(mismatches)} payee name(s) do not match the account holder (rows "
            + ", ".join(str(n.row) for n in mismatches[:10])
            + ("…)" if len(mismatches) > 10 else ")")
        )
        (pf.problems if block_on_name_mismatch else pf.notes).append(msg)
    return pf


async def _no_names() -> list[NameCheck]:
    return []


@dataclass(frozen=True)
class PreflightOptions:
    """What the pre-flight checks and how: names, fees, the most reads in flight (fewer when the service's
    pace and round trip need fewer: `tasks.runtime.inflight`), the lookup cache."""

    check_names: bool = True
    block_on_name_mismatch: bool = False
    concurrency: int = DEFAULT_CAP
    exact_fees: bool = False
    use_cache: bool = True
    policy: CachePolicy = field(default_factory=CachePolicy)


def _open_cache(payops: PayopsSettings) -> tuple[LookupCache | None, str | None]:
    """The payops database's lookup cache, or None and why (a broken cache costs speed, never the run)."""
    try:
        engine = open_database(payops)
    except SchemaBehind as exc:
        log.warning("lookup cache unavailable (%s): every lookup is asked", exc)
        return None, f"lookup cache unavailable ({exc}): every lookup was asked"
    except (SQLAlchemyError, ImportError) as exc:  # unreachable database, missing driver
        log.warning("lookup cache unavailable (%s): every lookup is asked", type(exc).__name__)
        return None, f"lookup cache unavailable ({type(exc).__name__}): every lookup was asked"
    return LookupCache(engine), None


@task(cache_policy=NO_CACHE, name="preflight", **API_TASK_RETRY)
async def preflight_task(
    settings: PaymentsSettings,
    rows: list[PayoutRow],
    options: PreflightOptions,
    rate_per_s: float,
    payops: PayopsSettings,
) -> Preflight:
    """The pre-flight with the lookup cache of ``payops``' database (when ``options.use_cache``)."""
    cache, why = await asyncio.to_thread(_open_cache, payops) if options.use_cache else (None, None)
    async with payments_client(settings, rate_per_s=rate_per_s) as (client, transport):
        pf = await run_preflight(
            client,
            rows,
            check_names=options.check_names,
            block_on_name_mismatch=options.block_on_name_mismatch,
            exact_fees=options.exact_fees,
            cache=cache,
            policy=options.policy,
            gate=transport.in_flight(options.concurrency),
        )
        pf.api_calls = Counter(client.api_calls)
        pf.limiter = transport.stats
    if why:
        pf.notes.append(why)
    return pf
