"""Per-phase durations and API calls of one flow run: the figures every JSON summary reports (the one
clock of a run: tests/architecture/test_rules_once.py finds another)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, TypeVar

from payops.tasks.runtime.run_summary import RunSummary

S = TypeVar("S", bound=RunSummary)


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

    def finish(self, summary: S, outcome: str) -> S:
        """Set the summary's ``outcome`` and write the figures (`into`)."""
        return self.into(summary, outcome=outcome)

    def into(self, summary: S, **more: Any) -> S:
        """Write `api_calls`, `phase_durations_s` and `duration_s` (and ``more``) into a typed summary."""
        figures = {
            **more,
            "api_calls": dict(sorted(self.api_calls.items())),
            "phase_durations_s": self.phases,  # the meter's own: a phase ending later (the reports) shows
            "duration_s": self.elapsed,
        }
        for name, value in figures.items():
            setattr(summary, name, value)
        return summary
