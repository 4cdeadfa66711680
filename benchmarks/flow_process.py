"""The payops process of one `benchmarks/payouts_e2e.py` run: the payout flow, with CPU and RSS per phase.

Its own module, run as ``python -m benchmarks.flow_process SHEET LABEL REPORTS [--poll-deadline-s S]``, so
the measured process imports what payops imports and nothing of the benchmark's scaffolding (the sheet
writer's openpyxl, the emulator's package: about 35 MB of RSS that `payops payouts` never has). Prints one
JSON line.

Its peak RSS is ``VmHWM``, this process's own high-water mark since its exec: ``ru_maxrss`` carries the
parent's RSS at the fork across the exec (Linux keeps the larger), so a benchmark process holding a large
sheet would have shown up in it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class PhaseSampler:
    """A progress watcher that samples this process's RSS every 20 ms: peak RSS and CPU seconds per phase."""

    def __init__(self) -> None:
        self.phase_name = "start"
        self.peak_mb: dict[str, float] = {}
        self.cpu_s: dict[str, float] = {}
        self._cpu_mark = time.process_time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        page_mb = os.sysconf("SC_PAGE_SIZE") / 1024 / 1024
        with open("/proc/self/statm") as statm:
            while not self._stop.wait(0.02):
                statm.seek(0)
                rss = int(statm.read().split()[1]) * page_mb
                name = self.phase_name
                self.peak_mb[name] = round(max(self.peak_mb.get(name, 0.0), rss), 1)

    def phase(self, name: str) -> None:
        now = time.process_time()
        self.cpu_s[self.phase_name] = round(self.cpu_s.get(self.phase_name, 0) + now - self._cpu_mark, 2)
        self._cpu_mark, self.phase_name = now, name

    def batches(self, sent: int, total: int) -> None:
        return None

    def payouts(self, final: int, total: int, awaiting_review: int) -> None:
        return None

    def failed(self, reference: str, status: str, reason: str | None) -> None:
        return None

    def stop(self) -> None:
        self.phase("end")
        self._stop.set()
        self._thread.join()


POLL_DEADLINE_S = 1800.0


def own_peak_rss_mb() -> float:
    """This process's peak RSS since its exec (``VmHWM``), in MB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def run_flow(sheet: Path, label: str, report_dir: str, poll_deadline_s: float = POLL_DEADLINE_S) -> dict:
    """The payout flow on `sheet` in this process, with the figures of its summary, CPU and RSS per phase."""
    from payops.tasks.runtime.memory import gc_paused

    with gc_paused():  # as `payops payouts` imports the flow (deployments/cli/_common.quiet_prefect)
        from payops.flows.outcomes import run_summary
        from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
        from payops.tasks.runtime.progress import watching

    sampler = PhaseSampler()
    t0 = time.perf_counter()
    params = PayoutRunParams(
        source=str(sheet), label=label, report_dir=report_dir, poll_deadline_s=poll_deadline_s
    )
    with watching(sampler):
        s = run_summary(asyncio.run(payout_spreadsheet(params, return_state=True))).as_json()
    wall = time.perf_counter() - t0
    sampler.stop()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    calls: Counter[str] = Counter(s["api_calls"])
    pre = s.get("preflight") or {}
    return {
        "wall_s": round(wall, 2),
        "outcome": s["outcome"],
        "phase_durations_s": s["phase_durations_s"],
        "phase_cpu_s": {k: v for k, v in sampler.cpu_s.items() if k not in {"start", "end"}},
        "phase_peak_rss_mb": {k: v for k, v in sampler.peak_mb.items() if k != "end"},
        "peak_rss_mb": round(own_peak_rss_mb(), 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "preflight": {
            "wall_s": s["phase_durations_s"].get("preflight"),
            "cache": pre.get("cache"),
            "name_checks": dict(pre.get("name_checks") or {}),
            "rate_limit": pre.get("rate_limit"),
            "problems": pre.get("problems"),
        },
        "rows_total": s.get("rows_total", 0),
        "rows_valid": s.get("rows_valid", 0),
        "amount_total": s.get("amount_total", "0.00"),
        "payouts_by_status": s.get("payouts_by_status", {}),
        "refused_items": s.get("refused_items", 0),
        "replayed_payouts": s.get("replayed_payouts", 0),
        "not_final": len(s.get("not_final", [])),
        "deadline_reached": s.get("deadline_reached", False),
        "api_calls_total": sum(calls.values()),
        "api_calls": dict(calls),
        "batches": s["batches"],
        "rate_limit": s.get("rate_limit"),
    }


def flow_command(sheet: Path, label: str, report_dir: str, poll_deadline_s: float) -> list[str]:
    """This module as a command: the payout flow on `sheet` in a process of its own."""
    cli = [sys.executable, "-m", "benchmarks.flow_process", str(sheet), label, report_dir]
    return [*cli, "--poll-deadline-s", str(poll_deadline_s)]


def measured_env() -> dict[str, str]:
    """The environment of a measured process: this one's, with its bytecode cached as an installed payops
    has it (pip compiles on install), whatever ``PYTHONDONTWRITEBYTECODE`` says here: compiling payops'
    sources would add about 0.1 s to every run."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def start_flow_process(
    sheet: Path, label: str, report_dir: str, poll_deadline_s: float = POLL_DEADLINE_S
) -> subprocess.Popen[bytes]:
    """The flow process started (its own process group, SIGTERM when the caller dies), its stdout piped,
    in the `measured_env`."""
    from payops.tasks.runtime.child_processes import preexec_own_group_dying_with_parent

    return subprocess.Popen(
        flow_command(sheet, label, report_dir, poll_deadline_s),
        cwd=ROOT,
        env=measured_env(),
        stdout=subprocess.PIPE,
        preexec_fn=preexec_own_group_dying_with_parent(),  # noqa: PLW1509 - setsid + pdeathsig only
    )


def run_flow_process(
    sheet: Path, label: str, report_dir: str, poll_deadline_s: float = POLL_DEADLINE_S
) -> dict:
    """The flow process to its end: its figures, and ``process_s``, from its start to its exit (interpreter
    start, imports, the flow, shutdown), as a `payops payouts` run."""
    t0 = time.perf_counter()
    proc = start_flow_process(sheet, label, report_dir, poll_deadline_s)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, out)
    return {**json.loads(out), "process_s": round(time.perf_counter() - t0, 2)}


def main() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
    ap = argparse.ArgumentParser(description="the payout flow on one sheet, measured")
    ap.add_argument("sheet", type=Path)
    ap.add_argument("label")
    ap.add_argument("reports")
    ap.add_argument("--poll-deadline-s", type=float, default=POLL_DEADLINE_S)
    args = ap.parse_args()
    print(json.dumps(run_flow(args.sheet, args.label, args.reports, args.poll_deadline_s)), flush=True)
    from payops.tasks.runtime.memory import heap_frozen_for_exit

    heap_frozen_for_exit()  # as `payops` does at its end


if __name__ == "__main__":
    main()
