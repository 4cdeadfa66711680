"""How far a run is, told to whoever watches: the seam between the flow and a display.

The flow and its tasks call :func:`progress` (a no-op unless a watcher is set); `payops payouts` sets a
terminal or plain-line watcher with :func:`watching`. A context variable carries the watcher, so runs in
other threads or requests (the console) never see each other's progress, and nothing here imports Prefect.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol


class ProgressWatcher(Protocol):
    """What a display is told. Every call is cheap and never raises into the run."""

    def phase(self, name: str) -> None:
        """A phase starts: reading, preflight, approval, sending, polling, reporting, done."""

    def batches(self, sent: int, total: int) -> None:
        """Batches answered by the service so far, of the run's total."""

    def payouts(self, final: int, total: int, awaiting_review: int) -> None:
        """Payouts in a final status so far, of those accepted; how many wait for the provider's review."""

    def failed(self, reference: str, status: str, reason: str | None) -> None:
        """A payout reached a failed status (failed, refunded): told once, as soon as the poll sees it."""


class _Nobody:
    def phase(self, name: str) -> None:
        return None

    def batches(self, sent: int, total: int) -> None:
        return None

    def payouts(self, final: int, total: int, awaiting_review: int) -> None:
        return None

    def failed(self, reference: str, status: str, reason: str | None) -> None:
        return None


_NOBODY = _Nobody()
_watcher: ContextVar[ProgressWatcher] = ContextVar("payops_progress", default=_NOBODY)


def progress() -> ProgressWatcher:
    """The watcher of the current run (a no-op when nobody watches)."""
    return _watcher.get()


@contextmanager
def watching(watcher: ProgressWatcher) -> Iterator[ProgressWatcher]:
    """Tell ``watcher`` about the runs started inside this block (in this context)."""
    token = _watcher.set(watcher)
    try:
        yield watcher
    finally:
        _watcher.reset(token)
