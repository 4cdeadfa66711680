"""Intake benchmark: read+validate a generated payout xlsx, against pandas.read_excel(engine="openpyxl").

Usage: ``python benchmarks/intake.py [--rows 100000] [--repeat 3] [--out FILE]``. Prints JSON. Each
measurement runs in its own subprocess so its peak RSS (``ru_maxrss``) is its own; generation time is not
measured. Both sides run ``--repeat`` times, interleaved, and their medians are compared (the samples are
printed too). Wall and CPU seconds are both reported: on a shared machine the CPU figure is the one that does
not depend on the load.
The reader parses in a resource-limited child process (tasks/intake/sandboxed.py); the same read is also
measured in-process (the parser called directly, as before the child existed), interleaved, and the
difference is reported as ``parser_child_overhead_seconds``. Peak RSS is the larger of the reader's and the
parser child's.
Targets on the 2-core reference machine: read+validate ≤ 3.5 s, ≥ 10× faster than openpyxl, peak RSS ≤ 400 MB,
parser child overhead ≤ 0.3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("mtn", "telecel", "airteltigo")

_MEASURE_INTAKE = """
import json, resource, sys, time
from payops.tasks.intake import read_payout_sheet
if sys.argv[2] == "in-process":  # the reader as it was before the parser child: same code, no child
    import payops.tasks.intake.reading as reading
    from payops.tasks.intake.parsing import ParseLimits, parse_csv, parse_xlsx

    class InProcess:
        def __init__(self, options):
            self.limits = ParseLimits(options.max_rows, options.max_columns)
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return None
        def send(self, kind, data):
            self.sent = kind, data
        def result(self):
            kind, data = self.sent
            return (parse_xlsx if kind == "xlsx" else parse_csv)(data, self.limits)

    reading.start_parser = InProcess
t0, c0 = time.perf_counter(), time.process_time()
result = read_payout_sheet(sys.argv[1])
seconds = time.perf_counter() - t0
usage = resource.getrusage(resource.RUSAGE_SELF)
child = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": seconds, "cpu": time.process_time() - c0, "rows": len(result.rows),
                  "errors": len(result.errors), "warnings": len(result.warnings), "rss_kb": usage.ru_maxrss,
                  "child_cpu": child.ru_utime + child.ru_stime, "child_rss_kb": child.ru_maxrss}))
"""

_MEASURE_OPENPYXL = """
import json, resource, sys, time
import pandas as pd
t0, c0 = time.perf_counter(), time.process_time()
frame = pd.read_excel(sys.argv[1], engine="openpyxl", dtype=str)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "cpu": time.process_time() - c0, "rows": len(frame),
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def generate(path: Path, rows: int) -> None:
    """Write a realistic payout sheet (text phone numbers, numeric amounts) in openpyxl's write-only mode."""
    from openpyxl import Workbook

    book = Workbook(write_only=True)
    sheet = book.create_sheet("payouts")
    sheet.append(["reference", "amount", "currency", "provider", "destination", "payee name", "note", "team"])
    for i in range(rows):
        sheet.append(
            [
                f"BENCH-{i:07d}",
                round(10 + (i * 37 % 100_000) / 100, 2),
                "GHS",
                PROVIDERS[i % 3],
                f"024{i:07d}",
                f"Payee {i}",
                "monthly stipend" if i % 2 else "",
                f"team-{i % 17}",
            ]
        )
    book.save(path)


def _run(code: str, path: Path, *mode: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), *mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(samples: list[dict[str, float]], key: str) -> float:
    return statistics.median(s[key] for s in samples)


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="data rows to generate (default 100000)")
    parser.add_argument("--out", type=Path, help="where to write the generated xlsx (default: a temp file)")
    parser.add_argument("--skip-openpyxl", action="store_true", help="skip the (slow) openpyxl baseline")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each measurement, interleaved; medians are reported"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.out or Path(tmp) / "bench-payouts.xlsx"
        started = time.perf_counter()
        generate(path, args.rows)
        generated = time.perf_counter() - started
        # Interleaved (ours, openpyxl, ours, ...) so a change in the machine's load hits both sides alike.
        runs: list[dict[str, float]] = []
        in_process: list[dict[str, float]] = []
        baselines: list[dict[str, float]] = []
        for _ in range(max(1, args.repeat)):
            runs.append(_run(_MEASURE_INTAKE, path, "sandboxed"))
            in_process.append(_run(_MEASURE_INTAKE, path, "in-process"))
            if not args.skip_openpyxl:
                baselines.append(_run(_MEASURE_OPENPYXL, path))
        seconds, cpu = _median(runs, "seconds"), _median(runs, "cpu")
        rss_mb = max(max(r["rss_kb"], r["child_rss_kb"]) for r in runs) / 1024
        in_process_seconds = _median(in_process, "seconds")
        figures: dict[str, object] = {
            "rows": args.rows,
            "file_bytes": path.stat().st_size,
            "generate_seconds": round(generated, 2),
            "repeat": len(runs),
            "read_validate_seconds": round(seconds, 3),
            "read_validate_cpu_seconds": round(cpu, 3),
            "read_validate_samples_s": [round(r["seconds"], 3) for r in runs],
            "rows_per_second": round(args.rows / seconds),
            "parser_child_cpu_seconds": round(_median(runs, "child_cpu"), 3),
            "peak_rss_mb": round(rss_mb, 1),
            "peak_rss_mb_reader": round(max(r["rss_kb"] for r in runs) / 1024, 1),
            "peak_rss_mb_parser_child": round(max(r["child_rss_kb"] for r in runs) / 1024, 1),
            "in_process_read_validate_seconds": round(in_process_seconds, 3),
            "in_process_samples_s": [round(r["seconds"], 3) for r in in_process],
            "in_process_cpu_seconds": round(_median(in_process, "cpu"), 3),
            "in_process_peak_rss_mb": round(max(r["rss_kb"] for r in in_process) / 1024, 1),
            "parser_child_overhead_seconds": round(seconds - in_process_seconds, 3),
            "parser_child_overhead_cpu_seconds": round(
                cpu + _median(runs, "child_cpu") - _median(in_process, "cpu"), 3
            ),
            "valid_rows": runs[0]["rows"],
            "errors": runs[0]["errors"],
            "warnings": runs[0]["warnings"],
        }
        if baselines:
            base_seconds, base_cpu = _median(baselines, "seconds"), _median(baselines, "cpu")
            figures["openpyxl_read_seconds"] = round(base_seconds, 3)
            figures["openpyxl_read_cpu_seconds"] = round(base_cpu, 3)
            figures["openpyxl_samples_s"] = [round(b["seconds"], 3) for b in baselines]
            figures["openpyxl_peak_rss_mb"] = round(max(b["rss_kb"] for b in baselines) / 1024, 1)
            figures["speedup_vs_openpyxl"] = round(base_seconds / seconds, 1)
            figures["cpu_speedup_vs_openpyxl"] = round(base_cpu / cpu, 1)
        figures["targets_met"] = {
            "read_validate_le_3_5_s": seconds <= 3.5,
            "parser_child_overhead_le_0_3_s": seconds - in_process_seconds <= 0.3,
            "peak_rss_le_400_mb": rss_mb <= 400,
            **({"speedup_ge_10x": figures["speedup_vs_openpyxl"] >= 10} if baselines else {}),  # type: ignore[operator]
        }
    print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
