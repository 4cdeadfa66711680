"""Large runs hand the memory a phase freed back to the operating system (peak RSS of a 100k-row run)."""

from __future__ import annotations

import os
import sys

import pytest

from tasks import memory
from tasks.memory import LARGE_RUN_ROWS, release_freed_memory


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and trims glibc's heap")
def test_a_large_run_returns_freed_heap_pages() -> None:
    # 2 KB objects come from glibc's heap (not pymalloc); every 50th stays alive, as after a real phase,
    # so the freed pages sit between live ones where glibc does not give them back by itself.
    blobs = [bytes(2000) + str(i).encode() for i in range(60_000)]
    survivors = blobs[::50]
    del blobs
    before = _rss_mb()
    release_freed_memory(LARGE_RUN_ROWS)
    assert before - _rss_mb() >= 50  # about 120 MB were freed
    assert len(survivors) == 1200


def test_a_small_run_pays_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    collected: list[int] = []
    monkeypatch.setattr(memory.gc, "collect", lambda: collected.append(1) or 0)
    release_freed_memory(LARGE_RUN_ROWS - 1)
    assert collected == []
    release_freed_memory(LARGE_RUN_ROWS)
    assert collected == [1]
