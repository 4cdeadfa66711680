"""The cyclic collector and the heap: paused while objects that never form cycles pile up, and memory a
finished phase freed handed back to the operating system, for large sheets.

:func:`gc_paused` pauses the collector around bulk allocations of long-lived, acyclic objects: reading a
sheet (millions of cells and rows) and a CLI command's imports (Prefect, pydantic and SQLAlchemy build
hundreds of thousands of objects); the collector's passes over them find nothing to free.

:func:`share_one_malloc_arena` keeps every thread's allocations in one glibc heap, so memory one thread
freed is memory another can reuse.

:func:`collect_cycles_less_often` makes full collections rarer in a process that runs flows: with Prefect,
pydantic and SQLAlchemy loaded and a run's rows held, Python's defaults walk that whole heap again and
again (docs/performance.md, *The cyclic collector during a run*).

A large run frees tens of megabytes between phases (the parser's frame, the pre-flight's lookups, the
batches' item results), but glibc keeps freed heap pages mapped, so the process's peak RSS grows phase after
phase. :func:`release_freed_memory` runs the cyclic collector and asks glibc to return free pages
(``malloc_trim``). What each costs and saves: docs/performance.md, measured by `benchmarks/payouts_e2e.py
--rows 100000`. Hand-rolled because no library wraps ``malloc_trim``; elsewhere than glibc it only collects.

:func:`heap_frozen_for_exit` spares a finished CLI command the interpreter's collections at shutdown: with
Prefect, pydantic and SQLAlchemy loaded they walk every object of the heap (docs/performance.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

#: Below this many rows a run's phases free too little for a collection to be worth its time.
LARGE_RUN_ROWS = 20_000

RUN_GC_THRESHOLDS = (700, 10, 100)
"""The collector's thresholds while flows run: the young generations' are Python's (short-lived cycles go as
soon as ever); a full collection is considered after 100 collections of the middle generation, not 10."""


M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most heaps ("arenas") its malloc keeps (``<malloc.h>``)."""
RUN_MALLOC_ARENAS = 1
"""Heaps glibc keeps while flows run: one, shared by every thread."""


@cache
def _glibc(function: str) -> Callable[[int], int] | Callable[[int, int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), function) if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return None


def _malloc_trim() -> Callable[[int], int] | None:
    return _glibc("malloc_trim")  # type: ignore[return-value]


def share_one_malloc_arena() -> None:
    """Have glibc serve every thread started from now on from one heap (``mallopt(M_ARENA_MAX, 1)``).

    By default glibc gives each thread that allocates its own heap, up to eight per core, and memory freed in
    one is reused only there. A run's threads (``asyncio.to_thread``: the pre-flight's and the reports'
    SQLite work, the payops database's writes) each kept tens of megabytes of freed pages that the main
    thread could not reuse: a 100,000-row run peaked at 266.7 MB with a heap per thread and 221.7 MB with
    one (docs/performance.md, *One heap for every thread*). It costs CPU: about 10% of a 30,000-row run's
    (its pre-flight's SQLite thread and the main thread share the heap's lock), kept for the memory of
    large runs. Called by every flow's first step (`tasks.runtime.clients.open_clients`); threads that
    already have their heap keep it.
    Hand-rolled: no library wraps ``mallopt``; elsewhere than glibc it does nothing."""
    mallopt = _glibc("mallopt")
    if mallopt is not None:
        mallopt(M_ARENA_MAX, RUN_MALLOC_ARENAS)  # type: ignore[call-arg]


def release_freed_memory(rows: int) -> None:
    """After a phase of a run over ``rows`` rows: collect cycles and return free heap pages (large runs)."""
    if rows < LARGE_RUN_ROWS:
        return
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def collect_cycles_less_often() -> None:
    """Raise the cyclic collector's thresholds to `RUN_GC_THRESHOLDS` for the rest of the process (every flow
    run's first step: `tasks.runtime.clients.open_clients`). Thresholds set higher already are kept.

    A full collection walks every container object the process holds: Prefect's, pydantic's and
    SQLAlchemy's (about 200,000 once a flow runs) and the run's rows, batches and states. With Python's
    defaults the collector took 0.16 s of a warm 2,000-row run (one full collection) and 6.8 s of a
    100,000-row one (5.4 s in 21 full collections); with these, 0.03 s and 2.0 s (0.55 s in 7, four of them
    `release_freed_memory`'s). Peak RSS at 100,000 rows stayed within 3 MB (docs/performance.md).
    A process that turned automatic collection off (a threshold of 0) keeps it off.
    """
    current = gc.get_threshold()
    if current[0] == 0:
        return
    gc.set_threshold(*(max(now, wanted) for now, wanted in zip(current, RUN_GC_THRESHOLDS, strict=True)))


def set_for_runs() -> None:
    """What a process that runs flows sets, at every flow's first step (`tasks.runtime.clients.open_clients`;
    benchmarks that run payops' reads without a flow call it too): rarer full collections
    (`collect_cycles_less_often`) and one heap for every thread (`share_one_malloc_arena`)."""
    collect_cycles_less_often()
    share_one_malloc_arena()


def heap_frozen_for_exit() -> None:
    """At the very end of a process: move every object to the permanent generation and stop the collector, so
    the collections the interpreter runs while shutting down find nothing to walk. Finalisation itself still
    runs (atexit handlers, files flushed and closed); memory goes back with the process."""
    gc.disable()
    gc.freeze()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a block that allocates many long-lived, acyclic objects.

    On the way out the survivors go straight to the oldest generation (``freeze`` then ``unfreeze`` moves
    them there without a traversal); otherwise the first young collection after re-enabling walks all of
    them. They are still collected, with the old generation, if they ever form cycles.
    A process that froze objects itself (the sandbox) keeps them frozen and pays that young collection.
    """
    was_enabled = gc.isenabled()
    promote = gc.get_freeze_count() == 0  # unfreeze would also release what the process froze on purpose
    gc.disable()
    try:
        yield
    finally:
        if promote:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def forget_task_results(results: Iterable[Any]) -> None:
    """Drop the flow run's links from these task results (and their fields) to their task runs' states.

    Prefect keeps, for the whole flow run, a copy of the state of every task result and of each of its direct
    fields (``FlowRunContext.run_results``: dependency tracking, should a result be passed to another task).
    A sheet too large to hold sends its 10,000 batches a part at a time and records their answers in its
    spill; they are never passed to another task, so their links go with the part. Hand-rolled: Prefect
    has no call for it; it finds the links as Prefect makes them (`link_state_to_result`, one level deep).
    """
    from prefect.context import FlowRunContext
    from prefect.utilities.collections import visit_collection

    context = FlowRunContext.get()
    if context is None:
        return
    links = context.run_results

    def drop(obj: Any) -> Any:
        links.pop(id(obj), None)
        return obj

    for result in results:
        visit_collection(result, visit_fn=drop, max_depth=1)
