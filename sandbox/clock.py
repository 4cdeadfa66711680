"""Clocks: the emulator reads time only through a ``Clock`` so tests can move it without sleeping."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now()`` returning an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """Wall-clock time (UTC)."""

    def now(self) -> datetime:
        """Current UTC time."""
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to (``advance``); starts at ``start`` or the current time."""

    def __init__(self, start: datetime | None = None) -> None:
        if start is not None and start.tzinfo is None:
            raise ValueError("ManualClock start must be timezone-aware")
        self._now = (start or datetime.now(UTC)).astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The clock's current time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward by ``seconds`` (never backwards) and return the new time."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, when: datetime) -> datetime:
        """Jump to ``when`` (must not be earlier than now)."""
        with self._lock:
            when = when.astimezone(UTC)
            if when < self._now:
                raise ValueError("a clock cannot go backwards")
            self._now = when
            return self._now


@lru_cache(maxsize=4096)
def iso(moment: datetime) -> str:
    """Wire form of a timestamp: ISO 8601 UTC with milliseconds and ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
