"""`payouts_e2e --against-rows N`: how a cold run grows from N rows to ``--rows``, in one invocation.

Each size is a csv of the realistic payroll (`benchmarks.payroll`), paid cold (an empty payops home: no
lookup cache) by the flow in its own process (`benchmarks.flow_process`, RSS sampled per phase) against its
own fresh emulator sized to the sheet (`benchmarks.emulator`). The figures per run: wall, phase durations,
peak RSS per phase and overall, API calls in all and per second (over the run's wall, and over its
``submit`` and ``poll`` phases, where only the service's answers are waited for). Targets (issue 34): the
larger run's peak RSS within 50 MB of the smaller one's; its calls per second are reported beside it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.payroll import Format, SheetFile, cycle_sheet

RSS_MARGIN_MB = 50
API_PHASES = ("submit", "poll")
"""The phases that only send and wait for the service (the pre-flight also computes fees and matches
names; its request rate is reported by itself, under ``preflight``)."""
PREFLIGHT_ENDPOINTS = ("GET /v1/party-lookups", "GET /v1/fee-quotes", "GET /v1/limits", "GET /v1/wallet")
"""The pre-flight's reads: every other call is the send's, the poll's (or the end-of-run reconciliation's
payout reads, where the run's counter holds them)."""


def calls_per_s(run: dict[str, Any]) -> dict[str, float | None]:
    """API calls per second: all of them over the run's wall time, and those not the pre-flight's over the
    send and poll phases."""
    phases = run.get("phase_durations_s") or {}
    api_s = sum(phases.get(p) or 0 for p in API_PHASES)
    sent = sum(n for endpoint, n in run["api_calls"].items() if not endpoint.startswith(PREFLIGHT_ENDPOINTS))
    waiting_s = api_s + (phases.get("preflight") or 0)
    return {
        "api_phases_share_of_wall": round(waiting_s / run["wall_s"], 3) if run["wall_s"] else None,
        "over_wall": round(run["api_calls_total"] / run["wall_s"], 1) if run["wall_s"] else None,
        "send_and_poll_calls": sent,
        "send_and_poll_s": round(api_s, 2),
        "over_send_and_poll": round(sent / api_s, 1) if api_s else None,
    }


def cold_run(
    tmp: Path,
    rows: int,
    fmt: Format,
    run_in_emulator: Callable[[SheetFile, str, str], dict[str, Any]],
) -> dict[str, Any]:
    """The payroll of `rows` written as `fmt`, paid cold by `run_in_emulator(sheet, label, reports)` (which
    starts the emulator and the flow process); the sheet removed afterwards."""
    from payops.deployments.demo import unattended_home

    sheet = cycle_sheet(tmp, f"scale-{rows}", fmt, rows, "C1", seed=1)
    os.environ.update(unattended_home(tmp / f"home-{rows}", operator=None))  # empty: a cold lookup cache
    try:
        run = run_in_emulator(sheet, f"bench-scale-{rows}", str(tmp / f"reports-{rows}"))
        return {"sheet": sheet.figures(), **run, "calls_per_s": calls_per_s(run)}
    finally:
        sheet.path.unlink()


def compare(base: dict[str, Any], big: dict[str, Any]) -> dict[str, Any]:
    """The larger run against the baseline size: RSS growth, calls per second, the targets."""
    growth = round(big["peak_rss_mb"] - base["peak_rss_mb"], 1)
    return {
        "peak_rss_growth_mb": growth,
        "calls_per_s": {"baseline": base["calls_per_s"], "rows": big["calls_per_s"]},
        "wall_per_row_ms": {
            "baseline": round(1000 * base["wall_s"] / base["sheet"]["rows"], 3),
            "rows": round(1000 * big["wall_s"] / big["sheet"]["rows"], 3),
        },
        "targets": {
            "peak_rss_within_50mb_of_baseline": growth <= RSS_MARGIN_MB,
            "every_row_paid": sum(big["payouts_by_status"].values()) == big["sheet"]["rows"],
        },
    }
