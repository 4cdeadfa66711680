"""The floor under `payouts_e2e`'s whole-process target: a process that imports Prefect, runs one async flow
with no task against the same Prefect server, and exits.

It starts and ends as a payops command does (the collector paused for the imports, the heap frozen at exit:
`payops.tasks.runtime.memory`), so what it takes is Prefect's own cost per process: the interpreter, Prefect's
import and logging set-up, one flow run's start and end against the server, the exit. A `payops payouts`
process pays all of it on top of its own work (its imports, the sheet, the batches, the poll, the run-end
reconciliation, the reports).

Run as ``python -m benchmarks.empty_flow``; `empty_flow_floor` times it in processes of its own.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REPEAT = 5


def main() -> None:
    import asyncio

    from payops.tasks.runtime.memory import gc_paused, heap_frozen_for_exit

    with gc_paused():
        from prefect import flow

    @flow(name="empty-flow-floor", log_prints=False)
    async def empty() -> None:
        """Nothing: the run's start and end are what is measured."""

    asyncio.run(empty())
    heap_frozen_for_exit()


def empty_flow_floor(repeat: int = REPEAT) -> dict[str, Any]:
    """This module run ``repeat`` times, one process after another, in the environment the benchmark's flow
    processes get (`benchmarks.flow_process.measured_env`): each process's wall time, from its start to its
    exit."""
    from benchmarks.flow_process import measured_env

    env = measured_env()
    runs: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "benchmarks.empty_flow"],
            cwd=ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )
        runs.append(round(time.perf_counter() - t0, 3))
    return {"median_s": round(statistics.median(runs), 2), "min_s": min(runs), "runs_s": runs}


if __name__ == "__main__":
    main()
