"""Large runs hand the memory a phase freed back to the operating system (peak RSS of a 100k-row run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from payops.tasks.runtime import memory
from payops.tasks.runtime.memory import LARGE_RUN_ROWS, release_freed_memory


def _in_a_child(probe: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``probe`` run by a fresh interpreter in the repository (the collector's settings are per process)."""
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=120, check=check
    )


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
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('collector', gc.isenabled(), gc.get_freeze_count() > 1000))\n"
        "from payops.deployments.cli import main\n"
        "sys.argv = ['payops', 'no-such-command']\n"
        "main()\n"
    )
    done = _in_a_child(probe)
    assert done.returncode == 2  # click's usage error
    assert "collector False True" in done.stdout


def test_a_flow_run_collects_cycles_less_often_and_keeps_a_higher_or_disabled_setting() -> None:
    # Each full collection walks Prefect's, pydantic's and SQLAlchemy's objects and the run's rows: with
    # Python's defaults (700, 10, 10) that took 5.4 s of a 100,000-row run. Every flow opens its clients
    # first, so a run started anywhere (a command, payops serve, a worker) sets the process's thresholds.
    probe = (
        "import asyncio, gc\n"
        "from payops.tasks.runtime.clients import open_clients\n"
        "from payops.tasks.runtime.memory import RUN_GC_THRESHOLDS, collect_cycles_less_often\n"
        "async def flow_body():\n"
        "    async with open_clients():\n"
        "        return gc.get_threshold()\n"
        "print('defaults', gc.get_threshold() == (700, 10, 10))\n"
        "print('in a run', asyncio.run(flow_body()) == RUN_GC_THRESHOLDS)\n"
        "gc.set_threshold(100_000, 5, 500)\n"
        "collect_cycles_less_often()\n"
        "print('higher kept', gc.get_threshold() == (100_000, 10, 500))\n"
        "gc.set_threshold(0)\n"
        "collect_cycles_less_often()\n"
        "print('off kept', gc.get_threshold()[0] == 0)\n"
    )
    lines = _in_a_child(probe, check=True).stdout.split("\n")[:4]
    assert lines == ["defaults True", "in a run True", "higher kept True", "off kept True"]


_HEAPS_PROBE = """
import asyncio, ctypes, ctypes.util, re, sys, tempfile, threading
from payops.tasks.runtime.clients import open_clients
def work():  # 4 KB blocks come from glibc's heap, not pymalloc's
    kept = [bytes(4096) + bytes([i % 256]) for i in range(2000)]
    del kept
def threads():
    started = [threading.Thread(target=work) for _ in range(4)]
    for t in started: t.start()
    for t in started: t.join()
async def flow_body():
    async with open_clients():
        threads()
asyncio.run(flow_body()) if sys.argv[1] == "in a run" else threads()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile(suffix=".xml") as out:
    f = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(f))
    libc.fclose(ctypes.c_void_p(f))
    print(len(re.findall(r'<heap nr="', open(out.name).read())))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.parametrize("where", ["in a run", "outside a run"])
def test_a_runs_threads_share_one_heap(where: str) -> None:
    # Each thread of a run once kept its own glibc heap, tens of megabytes of freed pages the others could
    # not reuse (docs/performance.md, *One heap for every thread*); every flow's first step shares one.
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _HEAPS_PROBE, where],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert (int(done.stdout) == 1) == (where == "in a run"), done.stdout
