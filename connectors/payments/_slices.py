"""A time window of a newest-first list read as slices at once, cut where it is dense.

``GET /v1/transactions`` pages newest first by cursor: a window of P pages read cursor by cursor costs P round
trips in sequence (100,000 transactions at 100 ms: 1,000 pages, 100 s). Its ``from``/``to`` filters cut the
window into slices that can be read at the same time. How many items a slice holds is unknown until it is
read, so the cut is adaptive:

* each slice reads its first page (the newest items of the slice);
* a slice with more to read and spare width (fewer slices reading than `width()` allows, the in-flight
  sizing of the caller's gate) estimates what it still holds from its page's density and hands the
  remainder over as up to ``spare + 1`` slices (`FANOUT` at most) that start at once; without spare width,
  or when the estimate says one page, it goes on by cursor (exact, and one request either way);
* when a slice ends, the next slice that reads a page with more to come finds the width spare and splits
  its remainder: the reads stay about `width()` wide until the window is read.

The remainder of a slice whose last read item was created at ``t`` is ``[low, t + MARGIN)``: it holds the
items created at ``t`` that the page did not (several can share a timestamp), and the items the page did
hold below that bound are left out by id. A page whose items all share one timestamp cannot be cut in time:
that slice goes on by cursor. Every item of the window is handed over once; the pages come in the order
they are read, not the list's order (a caller that shows them sorts).

Hand-rolled: the API offers no parallel read, and no library slices a cursor-paged HTTP list by time.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

T = TypeVar("T")

MARGIN = timedelta(milliseconds=1)
"""How far above its last item's timestamp a slice's remainder reaches: the service's timestamps may be
shown at millisecond precision, so an item up to 1 ms newer may sort after it."""

FANOUT = 4
"""The most slices one cut makes: its estimate comes from one page and can be far off (a window whose items
came in one burst), so a wrong guess costs at most 3 requests, and a dense window still reaches 16 slices
wide within two round trips (each dense piece cuts again)."""

FetchSlice = Callable[[datetime, datetime, str | None], Awaitable[tuple[list[T], str | None]]]
"""One page of the items created in ``[low, high)`` (after ``cursor``): its items and the next cursor."""


@dataclass(frozen=True)
class Slice:
    """``[low, high)``, less the items with an id in ``skip`` (already handed over by the slice cut)."""

    low: datetime
    high: datetime
    skip: frozenset[Hashable] = frozenset()


@dataclass
class SlicedRead:
    """What reading a window cost: requests, slices read, the most slices reading at once."""

    requests: int = 0
    slices: int = 0
    widest: int = 0
    items: int = 0
    _reading: int = field(default=0, repr=False)


def cut_remainder(
    part: Slice,
    items: Sequence[T],
    spare: int,
    page_size: int,
    created_at: Callable[[T], datetime | None],
    ident: Callable[[T], Hashable],
) -> list[Slice] | None:
    """The rest of ``part`` after its page ``items`` as up to ``spare + 1`` slices (`FANOUT`), newest first;
    None when it should go on by cursor (no spare width, one page or less estimated, or no time to cut)."""
    if spare < 1 or len(items) < 2:
        return None
    newest, oldest = created_at(items[0]), created_at(items[-1])
    if newest is None or oldest is None:  # no time to cut by
        return None
    top = oldest + MARGIN
    if top >= part.high or oldest <= part.low or newest <= oldest:
        return None
    estimate = len(items) * ((oldest - part.low) / (newest - oldest))
    parts = min(spare + 1, FANOUT, math.ceil(estimate / page_size))
    if parts < 2:
        return None
    step = (top - part.low) / parts
    bounds = [top - step * i for i in range(parts)] + [part.low]
    skip = part.skip | {ident(i) for i in items if (created_at(i) or top) < top}
    return [
        Slice(low, high, skip if high == top else frozenset())
        for high, low in zip(bounds, bounds[1:], strict=False)
        if low < high
    ]


async def read_sliced(
    fetch: FetchSlice[T],
    slices: Sequence[tuple[datetime, datetime]],
    on_page: Callable[[list[T]], None],
    *,
    width: Callable[[], int],
    page_size: int,
    created_at: Callable[[T], datetime | None],
    ident: Callable[[T], Hashable],
) -> SlicedRead:
    """Read every item of ``slices`` (``[low, high)`` windows that do not overlap) through ``fetch``, cut
    adaptively (the module's docstring); ``on_page`` gets each page's new items as it arrives. A failed read
    cancels the others and raises."""
    read = SlicedRead()

    async with asyncio.TaskGroup() as group:

        def start(part: Slice) -> None:
            read.slices += 1
            read._reading += 1
            read.widest = max(read.widest, read._reading)
            group.create_task(read_slice(part))

        async def read_slice(part: Slice) -> None:
            rest: list[Slice] | None = None
            try:
                cursor: str | None = None
                while rest is None:
                    items, cursor = await fetch(part.low, part.high, cursor)
                    read.requests += 1
                    fresh = [i for i in items if ident(i) not in part.skip] if part.skip else items
                    read.items += len(fresh)
                    on_page(fresh)
                    if not cursor:
                        return
                    spare = width() - read._reading
                    rest = cut_remainder(part, items, spare, page_size, created_at, ident)
            finally:
                read._reading -= 1
            for piece in rest:  # this slice hands its place over to the pieces
                start(piece)

        for low, high in slices:
            if low < high:
                start(Slice(low, high))
    return read
