"""How far a payout run is, on the operator's terminal (rich) or as plain lines when stdout is not one.

The flow reports through `tasks.runtime.progress` (a watcher in a context variable); these are the watchers.
Nothing here imports Prefect.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TextIO

from payops.connectors.payments.failure_words import failure_words
from payops.tasks.runtime.progress import ProgressWatcher, watching

PHASES = {
    "reading": "reading and validating the sheet",
    "preflight": "pre-flight: balance, limits, payee names",
    "quoting": "quoting prices",
    "approval": "waiting for approval",
    "sending": "sending batches",
    "polling": "polling payouts to a final status",
    "reporting": "writing the reports",
    "done": "done",
}


class PlainLines:
    """One line per change (phase, batch, payouts final, each payout failing), for logs and pipes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.last_payouts: tuple[int, int, int] | None = None

    def _line(self, text: str) -> None:
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def phase(self, name: str) -> None:
        self._line(f"phase: {PHASES.get(name, name)}")

    def batches(self, sent: int, total: int) -> None:
        self._line(f"batches sent: {sent}/{total}")

    def payouts(self, final: int, total: int, awaiting_review: int) -> None:
        if (final, total, awaiting_review) != self.last_payouts:
            self.last_payouts = (final, total, awaiting_review)
            self._line(f"payouts final: {final}/{total}, awaiting review: {awaiting_review}")

    def failed(self, reference: str, status: str, reason: str | None) -> None:
        self._line(failure_line(reference, status, reason))


class TerminalBars:
    """A live rich display: the phase, batches sent of total, payouts final of total, awaiting review."""

    def __init__(self, out: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[extra]}"),
            TimeElapsedColumn(),
            console=Console(file=out, force_terminal=True),
            refresh_per_second=8,
        )
        self.phase_bar = self.bars.add_task("starting", total=None, extra="")
        self.batch_bar = self.bars.add_task("batches sent", total=None, visible=False, extra="")
        self.payout_bar = self.bars.add_task("payouts final", total=None, visible=False, extra="")

    def start(self) -> None:
        self.bars.start()

    def stop(self) -> None:
        self.bars.stop()

    def phase(self, name: str) -> None:
        done = name == "done"
        self.bars.update(self.phase_bar, description=PHASES.get(name, name), total=1 if done else None)
        if done:
            self.bars.update(self.phase_bar, completed=1)
            self.stop()

    def batches(self, sent: int, total: int) -> None:
        self.bars.update(self.batch_bar, completed=sent, total=total, visible=True)

    def payouts(self, final: int, total: int, awaiting_review: int) -> None:
        extra = f"awaiting review: {awaiting_review}" if awaiting_review else ""
        self.bars.update(self.payout_bar, completed=final, total=total, visible=True, extra=extra)

    def failed(self, reference: str, status: str, reason: str | None) -> None:
        self.bars.console.print(failure_line(reference, status, reason), markup=False, highlight=False)


def failure_line(reference: str, status: str, reason: str | None) -> str:
    """The line a payout failing mid-run prints (before the run ends: its retry can be prepared): what
    happened and the next step in words (`connectors.payments.failure_words`), from its failure reason or,
    without one, its status."""
    words, next_step = failure_words(reason or status)
    return f"payout {reference} {status}: {words} Next: {next_step}"


def is_terminal(out: TextIO) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def _bars(out: TextIO) -> Iterator[ProgressWatcher]:
    bars = TerminalBars(out)
    bars.start()
    try:
        with watching(bars) as watcher:
            yield watcher
    finally:
        bars.stop()


def progress_display(json_out: bool, out: TextIO | None = None):
    """Nothing with --json; live bars on a terminal; plain lines otherwise."""
    out = out or sys.stdout
    if json_out:
        return nullcontext()
    if is_terminal(out):
        return _bars(out)
    return watching(PlainLines(out))
