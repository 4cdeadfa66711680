"""Benchmark: a csv payroll of any length through the streaming pieces, peak RSS against the row count.

Each measurement runs in a fresh process (``python -m benchmarks.streaming_csv --child ...``) so its peak
RSS (``VmHWM``) is its own. The sheet is realistic (`benchmarks.payouts_e2e`: a payee name on every row,
distinct numbers, amounts with cents; written as csv).

* ``streamed`` (the new pieces, on ``--rows`` and on ``--base-rows`` rows): the csv read and validated in
  chunks into a spill file (`tasks.intake.streaming`, `tasks.payouts.spill`); every batch of 100 built from
  the spill as a run sends it; an outcome recorded for every row (as the poll would); the result rows written
  as a csv report streamed from the spill (`tasks.reports.xlsx.write_csv`).
* ``whole`` (the baseline, same run, ``--base-rows`` rows): `read_payout_sheet`, which holds the sheet and
  its validated rows in lists, then every batch built from that list (the flow's path today; its limits
  of 50 MB and 200,000 rows make a larger csv a refusal there).

Usage: python benchmarks/streaming_csv.py [--rows 1000000] [--base-rows 100000]
Target (issue 34): peak RSS of the streamed ``--rows`` run within 50 MB of the streamed ``--base-rows`` run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEADERS = [
    "reference",
    "payee name",
    "amount",
    "currency",
    "provider",
    "destination type",
    "destination",
    "note",
]
LABEL = "bench-stream"


def write_payroll_csv(path: Path, rows: int) -> Path:
    """The realistic payroll of `benchmarks.payroll` (distinct numbers, names, cents) as a csv, streamed."""
    from benchmarks.payroll import iter_payees, iter_payroll, write_csv

    return write_csv(path, iter_payroll(iter_payees(rows), "C", seed=1), HEADERS)


def streamed(sheet: Path, work: Path) -> dict:
    from payops.tasks.intake import IntakeOptions
    from payops.tasks.intake.streaming import stream_csv
    from payops.tasks.payouts.spill import RowSpill
    from payops.tasks.reports.run_reports import RESULT_COLUMNS
    from payops.tasks.reports.xlsx import write_csv
    from payops.tasks.rows.outcome import RowOutcome

    t0 = time.perf_counter()
    with RowSpill(work / "spill.sqlite3") as spill:
        read = stream_csv(sheet, spill, IntakeOptions())
        t_read = time.perf_counter()
        items = 0
        for index in range(spill.batch_count()):
            batch = spill.batch(LABEL, index)
            items += len(batch.items)
            spill.record(
                RowOutcome(row, item["reference"], batch.reference, "accepted", "delivered", fee="0.50")
                for row, item in zip(batch.rows, batch.items, strict=True)
            )
        t_batches = time.perf_counter()
        lines = ([o.row, *o.cells()] for o in spill.outcomes())
        write_csv(str(work / "report.csv"), ["Row", *RESULT_COLUMNS], lines)
        t_report = time.perf_counter()
        counts = read.summary(spill)
    return {
        **counts,
        "batched_items": items,
        "read_validate_s": round(t_read - t0, 2),
        "batches_and_outcomes_s": round(t_batches - t_read, 2),
        "report_s": round(t_report - t_batches, 2),
        "spill_mb": round((work / "spill.sqlite3").stat().st_size / 2**20, 1),
    }


def whole(sheet: Path, work: Path) -> dict:
    from payops.tasks.intake import IntakeOptions, read_payout_sheet
    from payops.tasks.payouts.batching import batch_count, build_batch

    t0 = time.perf_counter()
    intake = read_payout_sheet(sheet, IntakeOptions())
    t_read = time.perf_counter()
    items = sum(len(build_batch(intake.rows, LABEL, i).items) for i in range(batch_count(intake.rows)))
    return {
        "rows_total": intake.rows_total,
        "rows_valid": len(intake.rows),
        "batched_items": items,
        "read_validate_s": round(t_read - t0, 2),
        "batches_s": round(time.perf_counter() - t_read, 2),
    }


def _own_peak_mb() -> float:
    """This process's peak RSS (VmHWM: reset at exec; ``ru_maxrss`` would carry the benchmark's own peak,
    the 1,000,000 payees it wrote, into this process across fork and exec)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def child(kind: str, sheet: Path, work: Path) -> None:
    from payops.tasks.runtime.memory import gc_paused

    with gc_paused():  # as the CLI imports
        import payops.tasks.intake.streaming  # noqa: F401
        import payops.tasks.payouts.spill  # noqa: F401
    start_mb = _own_peak_mb()
    figures = streamed(sheet, work) if kind == "streamed" else whole(sheet, work)
    peak = _own_peak_mb()
    parser = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the whole read's parser child
    print(
        json.dumps(
            {
                **figures,
                "peak_rss_mb": round(peak, 1),
                "parser_child_peak_rss_mb": round(parser, 1),
                "rss_after_imports_mb": round(start_mb, 1),
            }
        )
    )


def measure(kind: str, sheet: Path, tmp: Path) -> dict:
    work = Path(tempfile.mkdtemp(dir=tmp))
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.streaming_csv", "--child", kind, str(sheet), str(work)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        check=True,
    )
    return {**json.loads(done.stdout), "wall_s": round(time.perf_counter() - t0, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--base-rows", type=int, default=100_000)
    ap.add_argument("--child", nargs=3, metavar=("KIND", "SHEET", "WORK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, sheet, work = args.child
        child(kind, Path(sheet), Path(work))
        return
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        big = write_payroll_csv(tmp / "big.csv", args.rows)
        base = write_payroll_csv(tmp / "base.csv", args.base_rows)
        runs = {
            "whole_base": measure("whole", base, tmp),
            "streamed_base": measure("streamed", base, tmp),
            "streamed_rows": measure("streamed", big, tmp),
        }
        sizes = {
            "base_csv_mb": round(base.stat().st_size / 2**20, 1),
            "rows_csv_mb": round(big.stat().st_size / 2**20, 1),
        }
    growth = runs["streamed_rows"]["peak_rss_mb"] - runs["streamed_base"]["peak_rss_mb"]
    print(
        json.dumps(
            {
                "rows": args.rows,
                "base_rows": args.base_rows,
                "load_average": os.getloadavg(),
                **sizes,
                **runs,
                "peak_rss_growth_mb": round(growth, 1),
                "rows_per_s_streamed": round(args.rows / runs["streamed_rows"]["wall_s"]),
                "targets": {
                    "peak_rss_within_50mb_of_base": growth <= 50,
                    "streamed_base_peak_below_whole": runs["streamed_base"]["peak_rss_mb"]
                    < runs["whole_base"]["peak_rss_mb"],
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
