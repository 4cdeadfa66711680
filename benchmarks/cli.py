"""CLI benchmark: how long an operator waits for an answer.

Usage: ``python benchmarks/cli.py [--repeat 3] [--out FILE]``. Prints JSON. Measured in the same run, on the
demo sheet (examples/payouts-demo.xlsx, 260 rows with payee names), against the embedded emulator (so the
dry run's pre-flight, name lookups included, is real):

* ``check``: ``payops check`` (no Prefect), the median of ``--repeat`` runs;
* ``dry_run_no_server`` (the baseline): ``payops payouts --dry-run`` with no Prefect server configured, so
  Prefect starts and stops its temporary server inside the command;
* ``dry_run_with_server``: the same command with ``PREFECT_API_URL`` pointing at a Prefect server (as ``payops
  serve`` runs it) this benchmark runs on a free 127.0.0.1 port (first run and the median of the next ones);
  ``dry_run_with_server_no_name_check``: the same with ``--no-name-check`` (the pre-flight's 250 payee name
  lookups and 27 fee quotes need about 4.6 s at the default 50 requests/s after a burst of 50).

On a shared machine the wall figures follow the load (printed before and after); the CPU seconds do not.
Every server it starts is stopped (its process group) before it exits, also on errors.
Targets: check ≤ 1.5 s and ≥ 10× faster than the baseline; dry run with a running server ≤ 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: benchmarks.front_door beside it
SHEET = ROOT / "examples" / "payouts-demo.xlsx"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(args: list[str], env: dict[str, str], timeout: float = 300) -> dict[str, object]:
    """Wall and CPU seconds of one command (CPU: user+system of the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "payops.deployments.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = round(time.perf_counter() - t0, 3)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    summary: dict[str, object] = {}
    if proc.stdout.strip():
        try:
            summary = json.loads(proc.stdout)
        except ValueError:
            summary = {}
    result: dict[str, object] = {
        "seconds": seconds,
        "cpu_s": round(cpu, 3),
        "exit": proc.returncode,
        "outcome": summary.get("outcome"),
        "work_s": summary.get("duration_s"),  # inside the command: intake (and pre-flight) only
    }
    if proc.returncode not in (0, 2):
        result["stderr"] = proc.stderr.strip().splitlines()[-3:]
    return result


@contextmanager
def prefect_server(home: Path) -> Iterator[tuple[str, float]]:
    """A Prefect server on a free loopback port (as `payops serve` starts it, in its own process group,
    dying with this process); yields its API URL and start-up seconds; stopped on exit."""
    from payops.deployments.processes import (
        prefect_server_command,
        prefect_server_env,
        start_child,
        stop_child,
        wait_http,
    )

    port = _free_port()
    env = prefect_server_env("127.0.0.1", port, {**os.environ, "PREFECT_HOME": str(home)})
    env |= {"PREFECT_UI_ENABLED": "false", "PREFECT_SERVER_UI_STATIC_DIRECTORY": str(home / "ui")}
    t0 = time.perf_counter()
    proc = start_child(prefect_server_command(), env)
    url = f"http://127.0.0.1:{port}/api"
    try:
        wait_http(f"{url}/health", proc, 180, "the Prefect server")
        yield url, round(time.perf_counter() - t0, 3)
    finally:
        stop_child(proc, timeout=20)


def base_without(emulator: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    """``env`` without this benchmark's own emulator settings (serve brings its own)."""
    return {k: v for k, v in env.items() if k not in emulator}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from payops.sandbox import SandboxConfig, SandboxServer

    results: dict[str, object] = {
        "sheet": str(SHEET.relative_to(ROOT)),
        "machine_cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    with (
        tempfile.TemporaryDirectory(prefix="payops-bench-cli-") as tmp,
        SandboxServer(SandboxConfig()) as sandbox,
    ):
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PAYOPS_", "PREFECT_"))}
        base |= {
            **sandbox.env,
            "PAYOPS_HOME": f"{tmp}/payops",
            "PREFECT_HOME": f"{tmp}/prefect-cli",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_LOGGING_LEVEL": "WARNING",
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        }
        reports = ["--report-dir", f"{tmp}/reports"]
        dry = ["payouts", str(SHEET), "--dry-run", *reports, "--json"]

        checks = [_timed(["check", str(SHEET), *reports, "--json"], base) for _ in range(args.repeat)]
        baseline = _timed(dry, base)
        with prefect_server(Path(tmp) / "prefect-server") as (url, startup):
            served = {**base, "PREFECT_API_URL": url}
            first = _timed(dry, served)
            warm = [_timed(dry, served) for _ in range(max(1, args.repeat - 1))]
            no_names = [_timed([*dry, "--no-name-check"], served) for _ in range(max(1, args.repeat - 1))]

        from benchmarks.front_door import compare  # noqa: PLC0415 - after sys.path has the repository

        front_door = compare(Path(tmp), base_without(sandbox.env, base), SHEET, args.repeat, _timed)

    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    check_s = statistics.median(float(c["seconds"]) for c in checks)
    warm_s = statistics.median(float(w["seconds"]) for w in warm)
    baseline_s = float(baseline["seconds"])
    results |= {
        "check": {
            "median_s": check_s,
            "median_cpu_s": statistics.median(float(c["cpu_s"]) for c in checks),
            "samples": checks,
        },
        "dry_run_no_server": baseline,
        "dry_run_with_server": {
            "server_startup_s": startup,
            "first_s": first["seconds"],
            "median_s": warm_s,
            "samples": [first, *warm],
        },
        "dry_run_with_server_no_name_check": {
            "median_s": statistics.median(float(w["seconds"]) for w in no_names),
            "samples": no_names,
        },
        "dry_run_through_the_payops_server": front_door,
        "check_speedup_vs_dry_run_no_server": round(baseline_s / check_s, 1),
        "targets": {
            "check_le_1_5_s": check_s <= 1.5,
            "check_ge_10x_faster": baseline_s / check_s >= 10,
            "dry_run_with_server_le_5_s": warm_s <= 5.0,
            "through_the_server_within_10_percent_of_direct": front_door["ok"],
        },
        "all_ok": all(r["exit"] == 0 for r in [*checks, baseline, first, *warm, *no_names]),
    }
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
