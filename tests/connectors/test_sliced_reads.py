"""A transaction window read in slices at once (`connectors.payments._slices`): every item once, however the
timestamps fall (bursts sharing one instant, items a few microseconds apart, a sparse margin), and wide.

A fake newest-first list with the spec's filters (``from`` created at or after, ``to`` created before, pages
by cursor) stands for the service; then the emulator, through the client's `read_window`."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from payops.connectors.payments._slices import Slice, SlicedRead, cut_older, read_sliced

from tests.connectors.payments_emulator import Emulator
from tests.connectors.test_payments_contract import payout

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
PAGE = 100


@dataclass(frozen=True)
class Item:
    id: str
    created_at: datetime


class NewestFirst:
    """A list paged as ``GET /v1/transactions`` pages it: newest first, 100 a page, the cursor an index."""

    def __init__(self, items: list[Item], shown_to_ms: bool = False) -> None:
        self.items = sorted(items, key=lambda i: (i.created_at, i.id))
        self.shown_to_ms = shown_to_ms  # filters on the true time, shows it truncated to the millisecond
        self.in_flight = 0
        self.most_in_flight = 0

    async def fetch(self, low: datetime, high: datetime, cursor: str | None) -> tuple[list[Item], str | None]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)  # a round trip: the other slices' requests go out meanwhile
            index = len(self.items) if cursor is None else int(cursor)
            page: list[Item] = []
            while index > 0 and len(page) < PAGE:
                index -= 1
                item = self.items[index]
                if low <= item.created_at < high:
                    page.append(self.shown(item))
            more = len(page) == PAGE and index > 0
            return page, (str(index) if more else None)
        finally:
            self.in_flight -= 1

    def shown(self, item: Item) -> Item:
        if not self.shown_to_ms:
            return item
        at = item.created_at
        return Item(item.id, at - timedelta(microseconds=at.microsecond % 1000))


def bursty(n: int, seed: int) -> list[Item]:
    """``n`` items over an hour: most alone, some in bursts of up to 250 at one instant (a batch's payouts),
    some a few microseconds apart."""
    rng = random.Random(seed)
    items: list[Item] = []
    while len(items) < n:
        at = T0 + timedelta(seconds=rng.uniform(0, 3600))
        kind = rng.random()
        size = rng.randint(2, 250) if kind < 0.05 else rng.randint(2, 6) if kind < 0.15 else 1
        for k in range(min(size, n - len(items))):
            step = timedelta(microseconds=k) if 0.05 <= kind < 0.15 else timedelta(0)
            items.append(Item(f"tx-{len(items)}", at + step))
    return items


async def read_all(
    service: NewestFirst, slices: list[tuple[datetime, datetime]], width: int
) -> tuple[Counter[str], SlicedRead]:
    seen: Counter[str] = Counter()
    read = await read_sliced(
        service.fetch,
        slices,
        lambda page: seen.update(i.id for i in page),
        width=lambda: width,
        page_size=PAGE,
        created_at=lambda i: i.created_at,
    )
    assert read.items == sum(seen.values())
    return seen, read


@pytest.mark.parametrize("shown_to_ms", [False, True])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("width", [1, 4, 16])
async def test_every_item_of_the_window_is_handed_over_once(seed: int, width: int, shown_to_ms: bool) -> None:
    """Also when the service shows times truncated to the millisecond while it filters on the true ones."""
    items = bursty(3_000, seed)
    service = NewestFirst(items, shown_to_ms)
    low, high = T0 + timedelta(minutes=5), T0 + timedelta(minutes=55)
    seen, read = await read_all(service, [(low, high)], width)
    expected = {i.id for i in items if low <= i.created_at < high}
    assert set(seen) == expected
    assert max(seen.values()) == 1
    assert read.widest <= width
    pages = -(-len(expected) // PAGE)
    if width == 1:  # nothing to spare: cursor by cursor, as a plain read
        assert read.requests == pages
    else:  # a slice costs a partial last page at most, never a second read of the window
        assert read.requests <= pages + read.slices


async def test_a_dense_window_is_read_about_width_wide() -> None:
    """200 pages of evenly spread items, width 8: the first page shows the density, the rest is read 8 wide
    (the fake service counts the requests it holds at once), each slice's last page the only partial one."""
    items = [Item(f"tx-{k}", T0 + timedelta(milliseconds=90 * k)) for k in range(20_000)]
    service = NewestFirst(items)
    seen, read = await read_all(service, [(T0, T0 + timedelta(hours=1))], 8)
    assert len(seen) == 20_000 and max(seen.values()) == 1
    assert read.widest == 8 and service.most_in_flight == 8
    assert read.requests <= 200 + read.slices


async def test_batches_of_one_instant_each_are_read_wide() -> None:
    """How payops sends: 10,000 payouts in batches of 100, each batch created at one instant, so every page is
    one instant and shows no density: the cuts still reach the width, and each payout comes once."""
    items = [Item(f"tx-{k}", T0 + timedelta(milliseconds=37 * (k // 100))) for k in range(10_000)]
    service = NewestFirst(items)
    seen, read = await read_all(service, [(T0, T0 + timedelta(hours=1))], 16)
    assert len(seen) == 10_000 and max(seen.values()) == 1
    assert read.widest == 16 and service.most_in_flight == 16
    assert read.requests <= 100 * 1.5


async def test_a_window_of_one_instant_goes_on_by_cursor() -> None:
    """450 items created at one instant (batches answered together): no time to cut, every item once."""
    items = [Item(f"tx-{k}", T0) for k in range(450)]
    seen, read = await read_all(NewestFirst(items), [(T0, T0 + timedelta(seconds=1))], 16)
    assert len(seen) == 450 and max(seen.values()) == 1
    assert read.requests == 5


async def test_first_cuts_are_kept_and_each_is_read() -> None:
    items = bursty(1_500, 99)
    cuts = [(T0 + timedelta(minutes=m), T0 + timedelta(minutes=m + 10)) for m in range(0, 60, 10)]
    seen, _ = await read_all(NewestFirst(items), cuts, 4)
    assert set(seen) == {i.id for i in items} and max(seen.values()) == 1


def test_a_cut_hands_the_older_part_over_and_keeps_the_newest() -> None:
    """A slice of an hour that read 300 items over 10 minutes holds about 1,500 more: it keeps the newest
    quarter of the rest and hands three older quarters over, none overlapping."""
    top, newest, oldest = T0 + timedelta(hours=1), T0 + timedelta(minutes=60), T0 + timedelta(minutes=50)
    part = Slice(T0, top)
    pieces = cut_older(part, newest, oldest, 300, 3, PAGE)
    assert len(pieces) == 3
    assert part.floor == pieces[0].high < oldest and pieces[-1].low == T0
    assert all(a.low == b.high for a, b in zip(pieces, pieces[1:], strict=False))
    assert cut_older(Slice(T0, top), newest, oldest, 100, 0, PAGE) == []  # no width to spare
    # ~2 pages left: fewer than PIECE_PAGES for each of two slices
    assert cut_older(Slice(T0, top), newest, T0 + timedelta(minutes=20), 100, 3, PAGE) == []
    # one instant: the span from the slice's top stands in for the density
    one = Slice(T0, top)
    assert len(cut_older(one, oldest, oldest, 100, 3, PAGE)) == 1 and one.floor < oldest


async def test_read_window_on_the_emulator_matches_the_plain_list(emu: Emulator) -> None:
    """Payouts created in batches (one instant each) and alone, over simulated minutes: `read_window`, 6
    wide and in pages of 50, hands over each of them once, as the cursor-by-cursor list has them."""
    c = emu.client
    rng = random.Random(5)
    for b in range(6):
        await c.payout_batches.create(
            items=[payout(f"b{b}-{k}", "1.00") for k in range(rng.randint(60, 100))],
            reference=f"batch-{b}",
            idempotency_key=f"batch-{b}",
        )
        for k in range(rng.randint(20, 60)):
            await c.payouts.create(payout(f"a{b}-{k}", "1.00"))
            emu.clock.advance(rng.uniform(0.001, 2))
    plain = [tx.id async for tx in c.transactions.iterate(kind="payout", limit=100)]
    seen: Counter[str] = Counter()
    first = await c.payouts.get("b0-0")
    assert first.created_at is not None
    read = await c.transactions.read_window(
        lambda page: seen.update(tx.id for tx in page),
        from_=first.created_at - timedelta(seconds=1),
        to=emu.clock.now() + timedelta(seconds=1),
        width=lambda: 6,
        kind="payout",
        limit=50,  # 15 pages: enough for cuts
    )
    assert Counter(plain) == seen and len(plain) > 400
    assert read.widest > 1


async def test_a_service_showing_milliseconds_is_cut_exactly() -> None:
    """5,000 items within 2 s (several a millisecond), shown truncated to the millisecond while the service
    filters on the true time: cuts on whole milliseconds lose none and repeat none."""
    rng = random.Random(7)
    items = [Item(f"tx-{k}", T0 + timedelta(microseconds=rng.randrange(2_000_000))) for k in range(5_000)]
    seen, read = await read_all(NewestFirst(items, shown_to_ms=True), [(T0, T0 + timedelta(seconds=2))], 16)
    assert read.slices > 4
    assert len(seen) == 5_000 and max(seen.values()) == 1
