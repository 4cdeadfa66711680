"""The sheet flows' shared skeleton (flows/pipeline.py): parts sent with bounded concurrency, in index order,
each counted in the progress and logged once; a run ended by a phase carries its summary."""

from __future__ import annotations

import asyncio
import logging

import pytest
from payops.flows.pipeline import send_parts
from payops.tasks.runtime.progress import watching


class Watcher:
    """Records what the progress display would show."""

    def __init__(self) -> None:
        self.batches_seen: list[tuple[int, int]] = []
        self.phases: list[str] = []

    def phase(self, name: str) -> None:
        self.phases.append(name)

    def batches(self, done: int, total: int) -> None:
        self.batches_seen.append((done, total))

    def __getattr__(self, name: str):  # other progress callbacks: not this test's concern
        return lambda *args, **kwargs: None


def test_parts_go_out_bounded_in_order_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    running, most = 0, 0

    async def send_one(i: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01 * (5 - i % 5))  # later parts finish first
        running -= 1
        return i * 10

    watcher = Watcher()
    logger = logging.getLogger("pipeline-test")
    with caplog.at_level(logging.INFO, "pipeline-test"), watching(watcher):
        results = asyncio.run(
            send_parts(
                12, send_one, max_concurrent=3, said=lambda d, t, r: f"part {d}/{t}: {r}", logger=logger
            )
        )
    assert results == [i * 10 for i in range(12)]  # in index order, whatever order they finished in
    assert most == 3
    assert watcher.phases == ["sending"] and watcher.batches_seen[0] == (0, 12)
    assert [d for d, _ in watcher.batches_seen[1:]] == list(range(1, 13))
    assert len([r for r in caplog.records if r.getMessage().startswith("part ")]) == 12
