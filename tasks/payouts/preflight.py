"""Pre-flight: read-only checks before anything is sent (fees, balance, limits, payee names)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, closing
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from payops.connectors.payments import APIStatusError, NotFoundError, PaymentsClient, PaymentsSettings
from payops.store import SchemaBehind, open_database
from payops.store.cache import NAMES, QUOTES, Cached, LookupCache, cache_key
from payops.store.settings import PayopsSettings
from payops.tasks.payouts import fee_pricing
from payops.tasks.payouts.fee_pricing import FeeRange, Grid, PriceKey, QuoteMany
from payops.tasks.payouts.lookup_cache import CachePolicy, through_cache
from payops.tasks.rows.name_check import NameCheck
from payops.tasks.rows.payout_row import PayoutRow
from payops.tasks.runtime.clients import payments_client
from payops.tasks.runtime.inflight import DEFAULT_CAP
from payops.tasks.runtime.plurals import counted, noun_for
from payops.tasks.runtime.ratelimit import LimiterStats
from payops.tasks.runtime.retries import API_TASK_RETRY
from prefect import task
from prefect.cache_policies import NO_CACHE
from sqlalchemy.exc import SQLAlchemyError

ZERO = Decimal("0")
PART_ROWS = 20_000
"""The most valid rows the pre-flight holds at once (with their fees and name checks): a sheet of any length
is checked in parts of this size, in sheet order, with the result of one whole pass."""
log = logging.getLogger(__name__)
A = TypeVar("A")
B = TypeVar("B")


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


class PreflightSink(Protocol):
    """Where the pre-flight hands each part's row detail as the part is done, instead of keeping it on the
    `Preflight` (a spill file, for a sheet of any length)."""

    def fees(self, part: dict[int, FeeRange]) -> None:
        """Fees by row of one part; a later call for a row replaces the earlier (the re-priced fees)."""
        ...

    def names(self, part: list[NameCheck]) -> None:
        """The name checks of one part, in sheet order (every verdict, "match" included)."""
        ...


@dataclass
class Preflight:
    """What the pre-flight found. `fees_by_row` holds every row's fee and `names` every name check, unless
    the pre-flight was given a sink: then `fees_by_row` is empty and `names` holds only the checks whose
    verdict is not "match" (what the flow shows and approvers acknowledge); `name_counts` counts the verdicts
    over every row either way."""

    currencies: dict[str, CurrencyCheck]
    fees_by_row: dict[int, FeeRange]
    names: list[NameCheck] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    api_calls: Counter[str] = field(default_factory=Counter)
    limiter: LimiterStats | None = None
    lookups: Counter[str] = field(default_factory=Counter)  # cached, fresh, failed
    quotes: Counter[str] = field(default_factory=Counter)
    name_counts: Counter[str] = field(default_factory=Counter)  # verdict → rows, over every row

    def cache_counts(self) -> dict[str, dict[str, int]]:
        """Cached / fresh / failed answers, for name lookups and fee quotes."""
        keys = ("cached", "fresh", "failed")
        return {
            "name_lookups": {k: self.lookups[k] for k in keys},
            "fee_quotes": {k: self.quotes[k] for k in keys},
        }

    def release_row_detail(self) -> list[NameCheck]:
        """Drop what the run no longer needs once the pre-flight is reported and its approved fees recorded
        (fees by row); returns the name checks kept (every one unless a sink took them), for the report's
        holder name and name-check columns."""
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


class _Answered:
    """The answers this pre-flight already had, by kind and cache key, so a number or a priced input met
    again in a later part is not asked again (one whole pass asks each once).

    Held in a private temporary SQLite database (SQLite deletes its file when the connection closes) whose
    page cache is all it keeps in memory: one entry per number held in a dict would grow with the sheet."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None)
        self._db.executescript(
            "PRAGMA temp_store=FILE; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
            "CREATE TABLE answers (kind TEXT, key TEXT, value TEXT, PRIMARY KEY (kind, key)) WITHOUT ROWID;"
        )

    def close(self) -> None:
        self._db.close()

    def get_many(self, kind: str, keys: list[str]) -> dict[str, str | None]:
        """The answers kept among `keys` (a None value is an answer: no holder name)."""
        found: dict[str, str | None] = {}
        for start in range(0, len(keys), 500):  # bounded IN lists
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                self._db.execute(
                    f"SELECT key, value FROM answers WHERE kind = ? AND key IN ({marks})", (kind, *chunk)
                )
            )
        return found

    def put_many(self, kind: str, answers: Mapping[str, str | None]) -> None:
        self._db.execute("BEGIN")
        self._db.executemany(
            "INSERT OR REPLACE INTO answers VALUES (?,?,?)", [(kind, k, v) for k, v in answers.items()]
        )
        self._db.execute("COMMIT")


def _quote_key(key: PriceKey) -> str:
    return cache_key("payout-fee", *key)


@dataclass
class _Asker:
    """The pre-flight's read-only calls: through the cache, deduplicated, as many at once as `gate` admits."""

    client: PaymentsClient
    cache: LookupCache | None
    policy: CachePolicy
    gate: AbstractAsyncContextManager[Any]
    answered: _Answered
    lookups: Counter[str] = field(default_factory=Counter)
    quotes: Counter[str] = field(default_factory=Counter)

    async def quote_many(self, keys: list[PriceKey]) -> dict[PriceKey, Decimal | Exception]:
        inputs = {_quote_key(k): k for k in keys}
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

    def remembering(self, pricing: str) -> QuoteMany:
        """`quote_many` asking each priced input at most once for this `pricing` (one of the pre-flight's
        pricing calls) over every part, as that call made once over the whole sheet would."""

        async def quote_many(keys: list[PriceKey]) -> dict[PriceKey, Decimal | Exception]:
            hashes = {_quote_key(k): k for k in keys}
            known = self.answered.get_many(pricing, list(hashes))
            out: dict[PriceKey, Decimal | Exception] = {hashes[h]: Decimal(str(v)) for h, v in known.items()}
            fresh = await self.quote_many([k for h, k in hashes.items() if h not in known])
            priced = {_quote_key(k): str(fee) for k, fee in fresh.items() if not isinstance(fee, Exception)}
            self.answered.put_many(pricing, priced)  # a refused quote is not kept: exact pricing raises it
            return out | fresh

        return quote_many

    async def names(self, rows: Sequence[PayoutRow]) -> list[NameCheck]:
        """Holder names for rows that carry a payee name and a mobile money number (one per number)."""
        wanted = [r for r in rows if r.payee_name and r.destination_type == "msisdn"]
        inputs = {cache_key("msisdn", r.provider, r.destination): (r.provider, r.destination) for r in wanted}
        holders = self.answered.get_many(NAMES, list(inputs))
        answers, tally = await through_cache(
            self.cache,
            NAMES,
            {k: n for k, n in inputs.items() if k not in holders},
            lambda n: _lookup(self.client, n),
            self.policy.for_name,
            self.gate,
        )
        self.lookups.update(tally)
        fresh = {k: a.value if isinstance(a, Cached) and a.ok else None for k, a in answers.items()}
        self.answered.put_many(NAMES, fresh)
        holders.update(fresh)
        checks = []
        for r in wanted:
            holder = holders[cache_key("msisdn", r.provider, r.destination)]
            verdict = "unverified" if holder is None else name_verdict(r.payee_name or "", holder)
            checks.append(NameCheck(r.row, r.destination, r.payee_name or "", holder, verdict))
        return checks


def _refused(answer: Cached | Exception) -> Exception:
    return answer if isinstance(answer, Exception) else ValueError("the fee quote carried no fee")


@dataclass
class _Totals:
    """Per currency, running over the parts in sheet order: the totals and headroom, the largest row and how
    many rows exceed the per-transaction limit (what the problems name)."""

    rooms: dict[str, CurrencyCheck]
    currencies: dict[str, CurrencyCheck] = field(default_factory=dict)
    largest: dict[str, tuple[int, Decimal]] = field(default_factory=dict)  # first row of the largest amount
    over: Counter[str] = field(default_factory=Counter)

    def add(self, r: PayoutRow, fee: FeeRange) -> None:
        """A row with its highest possible fee (and its lowest)."""
        c = self.currencies.get(r.currency)
        if c is None:
            c = self.currencies[r.currency] = CurrencyCheck(r.currency)
            if room := self.rooms.get(r.currency):
                c.available, c.per_transaction = room.available, room.per_transaction
                c.daily_remaining, c.monthly_remaining = room.daily_remaining, room.monthly_remaining
        c.count += 1
        c.amount += r.amount
        self.add_fee(r, fee)
        big = self.largest.get(r.currency)
        if big is None or r.amount > big[1]:
            self.largest[r.currency] = (r.row, r.amount)
        if c.per_transaction is not None and r.amount > c.per_transaction:
            self.over[r.currency] += 1

    def add_fee(self, r: PayoutRow, fee: FeeRange) -> None:
        c = self.currencies[r.currency]
        c.fees += fee.high
        c.fees_low += fee.low

    def clear_fees(self, currencies: set[str]) -> None:
        """Start these currencies' fee totals again (their rows are priced again)."""
        for cur in currencies:
            self.currencies[cur].fees = self.currencies[cur].fees_low = ZERO

    def judge(self) -> tuple[list[str], set[str]]:
        """Problems, and the currencies whose problems might vanish with exact fees."""
        problems: list[str] = []
        refinable: set[str] = set()
        for cur, c in self.currencies.items():
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
            row, amount = self.largest[cur]
            if amount > c.per_transaction:
                problems.append(
                    f"{cur}: {counted(self.over[cur], 'row')} over the per-transaction limit "
                    f"{c.per_transaction} "
                    f"(largest: row {row}, {amount})"
                )
            for period, remaining in (("daily", c.daily_remaining), ("monthly", c.monthly_remaining)):
                if remaining is not None and remaining < c.needed:
                    problems.append(
                        f"{cur}: {period} outbound headroom {remaining} is below the sheet's {c.needed}"
                    )
                    if remaining >= c.amount + c.fees_low:
                        refinable.add(cur)
        return problems, refinable


@dataclass
class _Kept:
    """The sink when none is given: every fee and name check kept on the `Preflight`."""

    pf: Preflight

    def fees(self, part: dict[int, FeeRange]) -> None:
        self.pf.fees_by_row.update(part)

    def names(self, part: list[NameCheck]) -> None:
        self.pf.names.extend(part)


def _parts(rows: Sequence[PayoutRow]) -> Iterator[list[PayoutRow]]:
    """`rows` in slices of at most `PART_ROWS`, in sheet order (one, empty, for no rows)."""
    size = PART_ROWS
    for start in range(0, max(len(rows), 1), size):
        yield list(rows[start : start + size])


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
    sink: PreflightSink | None = None,
) -> Preflight:
    """All read-only checks; `problems` lists what would make the run fail if sent as it is.

    Lookups and quotes go as `gate` admits them (the task's: sized by the service's pace and round trip,
    `tasks.runtime.inflight`), or at most `concurrency` at a time without one.
    Fees are bracketed on a fixed amount grid (`tasks.payouts.fee_pricing`: its assumption is stated there)
    unless `exact_fees`; a currency whose checks fail only because of the bracket is quoted amount by amount.

    The rows are read in parts of at most `PART_ROWS` (slices of `rows`, in sheet order), with the result of
    one whole pass: the sheet's grid amounts are priced first, totals and the largest row per currency are
    running figures, and a number or priced input is asked once however many parts it is in. With a `sink`,
    each part's fees and name checks go to it and the `Preflight` keeps only the flagged names (see there).
    """
    with closing(_Answered()) as answered:
        asker = _Asker(
            client, cache, policy or CachePolicy(), gate or asyncio.Semaphore(concurrency), answered
        )
        return await _in_parts(asker, rows, check_names, block_on_name_mismatch, exact_fees, sink)


async def _in_parts(
    asker: _Asker,
    rows: Sequence[PayoutRow],
    check_names: bool,
    block_on_name_mismatch: bool,
    exact_fees: bool,
    sink: PreflightSink | None,
) -> Preflight:
    """`run_preflight`'s passes: the grid over every row, then the parts, then (when a currency fails only
    because of the bracket) the parts again, re-pricing that currency's bounded fees."""
    keys = [] if exact_fees else fee_pricing.grid_keys(r for part in _parts(rows) for r in part)
    grid, rooms = await _both(
        _no_grid() if exact_fees else fee_pricing.price_grid(asker.quote_many, keys),
        read_headroom(asker.client),
    )
    first = asker.remembering("fee")

    async def priced(part: Sequence[PayoutRow]) -> dict[int, FeeRange]:
        if grid is None:
            return await fee_pricing.exact_fees(first, part)
        return await fee_pricing.bracketed_fees(first, part, grid)

    pf = Preflight({}, {})
    out = sink if sink is not None else _Kept(pf)  # a sink may be empty, hence falsy (a spill has a len)
    totals = _Totals(rooms)
    bounded = 0
    for part in _parts(rows):
        fees, names = await _both(priced(part), asker.names(part) if check_names else _no_names())
        for r in part:
            totals.add(r, fees[r.row])
        bounded += sum(1 for f in fees.values() if not f.exact)
        pf.name_counts.update(n.verdict for n in names)
        out.fees(fees)
        out.names(names)
        if sink is not None:
            pf.names.extend(n for n in names if n.verdict != "match")
    problems, refinable = totals.judge()
    if refinable:
        refine = asker.remembering("exact-fee")
        totals.clear_fees(refinable)
        for part in _parts(rows):
            mine = [r for r in part if r.currency in refinable]
            fees = await priced(mine)  # as before: every input is answered already
            exact = await fee_pricing.exact_fees(refine, [r for r in mine if not fees[r.row].exact])
            fees.update(exact)
            for r in mine:
                totals.add_fee(r, fees[r.row])
            bounded -= len(exact)
            out.fees(exact)
        problems, _ = totals.judge()
    pf.currencies, pf.problems = totals.currencies, problems
    pf.lookups, pf.quotes = asker.lookups, asker.quotes
    if bounded:
        pf.notes.append(
            f"fees are an upper bound for {counted(bounded, 'row')} (priced on the fee grid; "
            "each payout's own fee comes back when it is sent)"
        )
    mismatches = pf.name_mismatches
    if mismatches:
        msg = (
            f"{counted(len(mismatches), 'payee name')} "
            + ("does not" if len(mismatches) == 1 else "do not")
            + f" match the account holder ({noun_for(len(mismatches), 'row')} "
            + ", ".join(str(n.row) for n in mismatches[:10])
            + ("…)" if len(mismatches) > 10 else ")")
        )
        (pf.problems if block_on_name_mismatch else pf.notes).append(msg)
    return pf


async def _no_grid() -> Grid | None:
    return None


async def _both(a: Awaitable[A], b: Awaitable[B]) -> tuple[A, B]:
    """Both results; when one fails, the other is cancelled before the failure is raised (nothing of a part
    keeps asking, or writing to the answers, after the pre-flight has ended)."""
    first, second = asyncio.ensure_future(a), asyncio.ensure_future(b)
    try:
        return await first, await second
    except BaseException:
        first.cancel()
        second.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        raise


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
    rows: Sequence[PayoutRow],
    options: PreflightOptions,
    rate_per_s: float,
    payops: PayopsSettings,
    sink: PreflightSink | None = None,
) -> Preflight:
    """The pre-flight with the lookup cache of ``payops``' database (when ``options.use_cache``).

    ``sink`` (optional) takes each part's fees and name checks as they are done (see `run_preflight`). As a
    task argument it must be wrapped by the caller in ``prefect.utilities.annotations.quote``, like the rows
    (``preflight_task(..., sink=quote(sink))``): Prefect would otherwise walk into it looking for futures.
    Prefect unwraps it before the call."""
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
            sink=sink,
        )
        pf.api_calls = Counter(client.api_calls)
        pf.limiter = transport.stats
    if why:
        pf.notes.append(why)
    return pf
