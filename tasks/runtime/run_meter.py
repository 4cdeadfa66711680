"""Per-phase durations and API calls of one flow run: the figures every JSON summary reports."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any


class RunMeter:
    """Marks phases as they end and sums the API calls the run's tasks report."""

    def __init__(self) -> None:
        self._start = self._mark = time.perf_counter()
        self.phases: dict[str, float] = {}
        self.api_calls: Counter[str] = Counter()

    def phase(self, name: str) -> None:
        """The phase `name` ends now (it began when the previous one ended)."""
        now = time.perf_counter()
        self.phases[name] = round(now - self._mark, 3)
        self._mark = now

    @property
    def elapsed(self) -> float:
        return round(time.perf_counter() - self._start, 3)

    def finish(self, summary: dict[str, Any], outcome: str) -> dict[str, Any]:
        """Set the summary's ``outcome`` and write the figures (`into`)."""
        summary["outcome"] = outcome
        return self.into(summary)

    def into(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Write `api_calls`, `phase_durations_s` and `duration_s` into a summary."""
        summary["api_calls"] = dict(sorted(self.api_calls.items()))
        summary["phase_durations_s"] = self.phases
        summary["duration_s"] = self.elapsed
        return summary
