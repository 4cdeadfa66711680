"""Pre-flight through the lookup cache against the emulator: hits, misses, expiry, failures, name verdicts,
one lookup per number and one quote per priced input, and fee brackets that hold the emulator's real fee."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from payops.sandbox.engine.party_lookups import holder_name
from payops.sandbox.money import payout_fee
from payops.store import migrate, open_engine
from payops.store.cache import NAMES, Cached, LookupCache, cache_key
from payops.tasks.payouts import fee_pricing
from payops.tasks.payouts.lookup_cache import CachePolicy
from payops.tasks.payouts.preflight import run_preflight
from payops.tasks.rows.payout_row import PayoutRow

from tests.connectors.payments_emulator import make_emulator

LOOKUPS = "GET /v1/party-lookups"
QUOTES = "GET /v1/fee-quotes/payouts"


def row(i: int, msisdn: str, amount: str, name: str | None = None) -> PayoutRow:
    return PayoutRow(
        row=i + 2,
        amount=Decimal(amount),
        currency="GHS",
        provider="mtn",
        destination_type="msisdn",
        destination=msisdn,
        payee_name=name if name is not None else holder_name(msisdn),
    )


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def cache(tmp_path: Path):
    engine = open_engine(f"sqlite:///{tmp_path / 'cache.sqlite3'}")
    migrate(engine)
    yield LookupCache(engine, Clock())
    engine.dispose()


async def preflight(rows: list[PayoutRow], cache: LookupCache | None, **kw):
    em = make_emulator()
    async with em.client:
        pf = await run_preflight(em.client, rows, cache=cache, **kw)
        return pf, dict(em.client.api_calls)


async def test_one_lookup_per_number_and_a_second_run_asks_nothing(cache: LookupCache) -> None:
    numbers = [f"23324{i:07d}" for i in range(100, 140)]
    rows = [row(i, numbers[i % 40], f"{20 + i}.{i % 100:02d}") for i in range(80)]  # each number twice
    first, calls = await preflight(rows, cache)
    assert calls[LOOKUPS] == 40
    assert first.lookups == {"fresh": 40, "cached": 0}
    assert {n.verdict for n in first.names} == {"match"}
    new_amounts = [r.model_copy(update={"amount": r.amount + Decimal("0.37")}) for r in rows]
    second, calls = await preflight(new_amounts, cache)
    assert LOOKUPS not in calls  # every name from the cache
    assert second.lookups == {"cached": 40}
    assert calls.get(QUOTES, 0) <= first.quotes["fresh"] // 4  # grid quotes mostly reused
    assert [(n.row, n.verdict) for n in second.names] == [(n.row, n.verdict) for n in first.names]


async def test_names_expire_after_their_ttl(cache: LookupCache) -> None:
    rows = [row(0, "233241110000", "10.00")]
    await preflight(rows, cache, policy=CachePolicy(name_ttl=timedelta(days=2)))
    cache.clock.now += timedelta(days=2, seconds=1)
    pf, calls = await preflight(rows, cache, policy=CachePolicy(name_ttl=timedelta(days=2)))
    assert calls[LOOKUPS] == 1 and pf.lookups == {"fresh": 1, "cached": 0}


async def test_a_cached_name_never_hides_a_fresh_mismatch_after_its_ttl(cache: LookupCache) -> None:
    number = "233241112222"
    # An earlier run saw "Yaw Darko" on this number; the sheet still says so, but the number changed hands.
    cache.put_many(
        NAMES, {cache_key("msisdn", "mtn", number): Cached("Yaw Darko", True)}, lambda _: timedelta(days=7)
    )
    rows = [row(0, number, "10.00", name="Yaw Darko")]
    assert holder_name(number) != "Yaw Darko"
    within, _ = await preflight(rows, cache)
    assert within.names[0].verdict == "match"  # inside the TTL the cached name is the answer (advisory)
    cache.clock.now += timedelta(days=7, seconds=1)
    after, calls = await preflight(rows, cache)
    assert calls[LOOKUPS] == 1
    assert after.names[0].verdict == "mismatch" and after.names[0].holder_name == holder_name(number)
    # advisory by default
    assert any("1 payee name does not match" in n for n in after.notes) and not after.problems
    blocked, _ = await preflight(rows, cache, block_on_name_mismatch=True)
    assert any("1 payee name does not match" in p for p in blocked.problems)


async def test_failures_are_not_cached_beyond_minutes(cache: LookupCache) -> None:
    rows = [row(0, "233241230404", "10.00", "Ama Mensah"), row(1, "233241230502", "10.00", "Kofi Owusu")]
    first, calls = await preflight(rows, cache)
    assert first.lookups == {"failed": 2, "cached": 0}
    assert {n.verdict for n in first.names} == {"unverified"}
    second, calls = await preflight(rows, cache)
    # "no such account" (404) is kept for minutes; the provider error (502) is never kept
    assert second.lookups == {"cached": 1, "failed": 1}
    cache.clock.now += timedelta(minutes=5, seconds=1)
    third, _ = await preflight(rows, cache)
    assert third.lookups == {"cached": 0, "failed": 2}
    with pytest.raises(ValueError, match="too long"):
        CachePolicy(failure_ttl=timedelta(hours=2))


async def test_without_a_cache_every_number_is_asked_each_run() -> None:
    rows = [row(0, "233241110000", "10.00")]
    for _ in range(2):
        pf, calls = await preflight(rows, None)
        assert calls[LOOKUPS] == 1 and pf.lookups == {"fresh": 1, "cached": 0}


async def test_bracketed_fees_hold_the_real_fee_with_few_quotes() -> None:
    amounts = [f"{a}.{(37 * a) % 100:02d}" for a in range(5, 3005, 3)]
    rows = [row(i, f"23324{i:07d}", amounts[i], name="") for i in range(len(amounts))]
    pf, calls = await preflight(rows, None, check_names=False)
    assert calls[QUOTES] <= 80 < len(amounts) // 10
    for r in rows:
        fee = pf.fees_by_row[r.row]
        assert fee.low <= payout_fee(r.amount) <= fee.high
    assert sum(1 for f in pf.fees_by_row.values() if f.exact) >= len(rows) // 4  # minimum, cap: exact
    exact, calls = await preflight(rows, None, check_names=False, exact_fees=True)
    assert calls[QUOTES] == len(amounts)
    assert all(exact.fees_by_row[r.row].high == payout_fee(r.amount) for r in rows)
    assert all(f.exact for f in exact.fees_by_row.values())
    assert exact.fee_total <= pf.fee_total


async def test_fees_that_fall_with_the_amount_are_quoted_exactly() -> None:
    rows = [row(i, f"23324{i:07d}", f"{100 + 10 * i}.00") for i in range(10)]
    asked: list[Decimal] = []

    async def falling(keys):  # a schedule the grid's assumption does not hold for
        asked.extend(k[0] for k in keys)
        return {k: Decimal(1000) / k[0] for k in keys}

    fees = await fee_pricing.bracketed_fees(falling, rows)
    assert all(fees[r.row].exact and fees[r.row].low == Decimal(1000) / r.amount for r in rows)
    assert {r.amount for r in rows} <= set(asked)
