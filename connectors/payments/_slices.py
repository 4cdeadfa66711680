"""A time window of a newest-first list read as slices at once, cut where it is dense.

``GET /v1/transactions`` pages newest first by cursor: a window of P pages read cursor by cursor costs P round
trips in sequence (100,000 transactions at 100 ms: 1,000 pages, 100 s). Its ``from``/``to`` filters cut the
window into slices that can be read at the same time. How many items a slice holds is unknown until it is
read, so the cut is adaptive:

* each slice reads its pages by cursor, newest first;
* after a page with more to come, when fewer slices read than `width()` allows (the in-flight sizing of the
  caller's gate), the slice estimates what it still holds from what it read (items over the time they span)
  and, when that is at least `PIECE_PAGES` pages per slice, hands the older part
  of its remainder to up to ``spare`` new slices (`FANOUT` - 1 at most) that start at once, keeping the
  newest part for itself;
* a slice that ends leaves its width spare, for the next cut.

A slice that keeps part of its remainder goes on by its cursor (the filters of a cursor are never changed)
and stops at the new lower bound it keeps (``floor``): items older than that come on its last page too and
are dropped, since the new slices hold them. No item is read by two slices but on such a last page, items
sharing one instant (a batch's payouts are created together) stay in one slice, and every item of the
window is handed over once. Cuts lie on whole milliseconds (`on_grid`) and the newest new slice drops what
is shown at or above its cut, so a service showing times to the millisecond (truncated or rounded) is
still cut exactly. The pages come in the order they are read, not the list's order (a caller that
shows them sorts).

Hand-rolled: the API offers no parallel read, and no library slices a cursor-paged HTTP list by time.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

T = TypeVar("T")

FANOUT = 4
"""The most slices a cut leaves (the cutting slice and 3 new ones): its estimate comes from what one slice
read and can be far off (a window whose items came in one burst), so a wrong guess costs at most 3
requests, and a dense window still reaches 32 slices wide within three round trips."""
PIECE_PAGES = 2
"""A cut is made only when each slice it leaves is estimated to hold this many pages: a slice's last page is
partial, so slices of a page or so would cost a request each for little."""

FetchSlice = Callable[[datetime, datetime, str | None], Awaitable[tuple[list[T], str | None]]]
"""One page of the items created in ``[low, high)`` (after ``cursor``): its items and the next cursor."""


@dataclass
class Slice:
    """Items created in ``[low, high)`` (the request's filters; the service's filter decides), handed over
    from ``floor`` once the slice handed its older part to other slices (`cut_older`), and below
    ``ceiling`` when it is the newest piece of such a cut (the floor of the slice it was cut from)."""

    low: datetime
    high: datetime
    floor: datetime | None = None
    ceiling: datetime | None = None

    def holds(self, created: datetime | None) -> bool:
        """Whether an item shown as created at ``created`` is this slice's to hand over."""
        if created is None:
            return True
        return (self.floor is None or created >= self.floor) and (
            self.ceiling is None or created < self.ceiling
        )

    def below_floor(self, created: datetime | None) -> bool:
        """Whether ``created`` is below the floor: the items after it are the older slices'."""
        return self.floor is not None and created is not None and created < self.floor


def on_grid(moment: datetime) -> datetime:
    """``moment`` down to a whole millisecond: a cut between slices lies where a time shown to the
    millisecond compares as the true one does, so the slice above (by what it is shown) and the slice below
    (by the service's filter) agree on every item."""
    return moment - timedelta(microseconds=moment.microsecond % 1000)


@dataclass
class SlicedRead:
    """What reading a window cost: requests, slices read, the most slices reading at once, items handed."""

    requests: int = 0
    slices: int = 0
    widest: int = 0
    items: int = 0
    _reading: int = field(default=0, repr=False)


def cut_older(
    part: Slice, newest: datetime, oldest: datetime, read: int, spare: int, page_size: int
) -> list[Slice]:
    """New slices for the older part of ``part``'s remainder ``[floor, oldest]``, oldest last, after it read
    ``read`` items from ``newest`` down to ``oldest``; ``part.floor`` is raised to where they start. None are
    made (``[]``) without spare width, or when the estimate gives fewer than `PIECE_PAGES` pages a slice.

    The estimate is the density of what was read; items all of one instant show none, and then the span
    from the slice's top stands in (a low guess when the window reaches far above its items: the next page
    shows the density)."""
    floor = part.floor or part.low
    if spare < 1 or read < 1 or oldest <= floor or part.high <= oldest:
        return []
    span = newest - oldest if newest > oldest else part.high - oldest
    pages_left = read * ((oldest - floor) / span) / page_size
    parts = min(spare + 1, FANOUT, math.floor(pages_left / PIECE_PAGES))
    if parts < 2:
        return []
    step = (oldest - floor) / parts
    bounds = [on_grid(oldest - step * i) for i in range(1, parts)] + [floor]
    if bounds[0] <= floor:
        return []
    part.floor = bounds[0]
    pieces = [Slice(low, high) for high, low in zip(bounds, bounds[1:], strict=False) if low < high]
    pieces[0].ceiling = bounds[0]  # what is shown at or above the cut is the cutting slice's
    return pieces


async def read_sliced(
    fetch: FetchSlice[T],
    slices: Sequence[tuple[datetime, datetime]],
    on_page: Callable[[list[T]], None],
    *,
    width: Callable[[], int],
    page_size: int,
    created_at: Callable[[T], datetime | None],
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
            try:
                cursor: str | None = None
                count = 0
                newest: datetime | None = None
                while True:
                    items, cursor = await fetch(part.low, part.high, cursor)
                    read.requests += 1
                    ours = [i for i in items if part.holds(created_at(i))]
                    read.items += len(ours)
                    count += len(ours)
                    on_page(ours)
                    oldest = created_at(items[-1]) if items else None
                    if not cursor or not items or part.below_floor(oldest):
                        return  # the end, or below the floor: the older items are other slices'
                    newest = newest or created_at(items[0])
                    if newest is not None and oldest is not None:
                        spare = width() - read._reading
                        for piece in cut_older(part, newest, oldest, count, spare, page_size):
                            start(piece)
            finally:
                read._reading -= 1

        for low, high in slices:
            if low < high:
                start(Slice(low, high))
    return read
