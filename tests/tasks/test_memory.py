"""Large runs hand the memory a phase freed back to the operating system (peak RSS of a 100k-row run)."""

from __future__ import annotations

import os
import sys

import pytest
from payops.tasks.runtime import memory
from payops.tasks.runtime.memory import LARGE_RUN_ROWS, release_freed_memory


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


def test_the_payops_command_exits_with_its_heap_frozen_and_its_code() -> None:
    # The interpreter's shutdown collections would walk the whole heap (Prefect, pydantic, SQLAlchemy) of a
    # finished command; at exit the heap is frozen and the collector off, and the exit code is the command's.
    import subprocess
    from pathlib import Path

    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('collector', gc.isenabled(), gc.get_freeze_count() > 1000))\n"
        "from payops.deployments.cli import main\n"
        "sys.argv = ['payops', 'no-such-command']\n"
        "main()\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2  # click's usage error
    assert "collector False True" in done.stdout
