"""The skeleton every sheet-driven flow shares (payouts, utility purchases).

A run is a sequence of named phases (read the sheet, pre-flight, approval, send, poll, report), each an async
function of the run's context (:class:`SheetRun`) that returns its typed result, or the run's final summary
when the run ends there (a refused sheet, a dry run, no approval): a value the flow returns as it is. Sending
goes in parts (batches, chunks) with bounded concurrency and the progress the CLI and the artifacts show
(:func:`send_parts`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from payops.flows.run_params import SheetRunParams, SheetRunStart, start_sheet_run
from payops.store.settings import PayopsSettings
from payops.tasks.intake import IntakeOptions
from payops.tasks.runtime.progress import progress
from payops.tasks.runtime.run_meter import RunMeter
from payops.tasks.runtime.run_outcomes import Outcome

T = TypeVar("T")
S = TypeVar("S")
"""A run's summary: its family's typed summary (`tasks.runtime.run_summary.RunSummary`)."""


@dataclass
class SheetRun(Generic[S]):
    """One run of a sheet-driven flow: its parameters, payops settings (read once at the flow's start),
    logger, meter, label and summary as they grow."""

    params: SheetRunParams
    settings: PayopsSettings
    begun: SheetRunStart
    summary: S
    label: str = ""
    sheet: str = ""
    """The fingerprint of the sheet's content (`tasks.payouts.sheet_check.sheet_fingerprint`), once read."""

    @classmethod
    def begin(cls, params: SheetRunParams, settings: PayopsSettings, summary: S) -> SheetRun[S]:
        """The run's context, with its summary's first form; an empty ``report_dir`` (a run started in
        Prefect's UI leaves it so) becomes the settings' report root."""
        params = params.model_copy(update={"report_dir": params.report_dir or settings.reports})
        return cls(params, settings, start_sheet_run(params), summary)

    @property
    def logger(self) -> Any:
        return self.begun.logger

    @property
    def meter(self) -> RunMeter:
        return self.begun.meter

    @property
    def options(self) -> IntakeOptions:
        return self.begun.options

    @property
    def started_wall(self) -> datetime:
        return self.begun.started_wall

    def finish(self, outcome: Outcome) -> S:
        """The summary with its outcome and the run's figures (calls, phase durations)."""
        return self.meter.finish(self.summary, outcome)

    @property
    def shown_name(self) -> str:
        """The name the run is shown by (its flow run's name), else its label."""
        from prefect.runtime import flow_run

        return str(flow_run.name or "") or self.label


async def send_parts(
    count: int,
    send_one: Callable[[int], Awaitable[T]],
    *,
    max_concurrent: int,
    said: Callable[[int, int, T], str],
    logger: Any,
    sent_before: int = 0,
    total: int | None = None,
) -> list[T]:
    """Send parts ``0 .. count-1`` (``send_one(i)``), at most ``max_concurrent`` at once, in order of their
    index in the result; the progress counts each part done and the log says ``said(done, total, result)``.
    A run sending its parts in several calls gives the ones ``sent_before`` and its ``total``."""
    sem = asyncio.Semaphore(max_concurrent)
    done = sent_before
    total = count if total is None else total
    progress().phase("sending")
    progress().batches(done, total)

    async def one(index: int) -> T:
        nonlocal done
        async with sem:
            result = await send_one(index)
        done += 1
        progress().batches(done, total)
        logger.info(said(done, total, result))
        return result

    return list(await asyncio.gather(*(one(i) for i in range(count))))
