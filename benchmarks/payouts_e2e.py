"""Benchmark: a realistic payroll through the payout flow, cold and warm cache, against a naive 16-way client;
at scale (``--against-rows``); and exactly once after a SIGKILL mid-send (``--kill-mid-run``).

The sheet is what a payroll looks like (`benchmarks.payroll`): a payee name on every row (most match the
emulator's directory of holder names, about 2% do not, 1% only partly), a distinct mobile money number per
row, amounts with random cents; written as xlsx or, with ``--format csv``, as csv, streamed (its write time
is reported). Every run meets its own fresh emulator (`payops sandbox`, its own process, wallet and limits
sized to the sheet: `benchmarks.emulator`) and the flow runs in a payops process of its own
(`benchmarks.flow_process`, RSS sampled per phase).

Default mode:

* `cold`: the flow on that sheet with an empty lookup cache (a new PAYOPS_HOME);
* `warm`: the same payees with new amounts and references, next cycle's payroll, with the cache the cold
  run filled;
* `naive`: one `POST /v1/payouts` per row, then `GET` each payout until final, 16 requests at a time (what a
  per-row integration does; it skips the pre-flight).
* `prefect_floor` (on loopback at up to 2,000 rows, where the warm process has its 1.5 s target): an empty
  Prefect flow process against the same server, 5 times (`benchmarks.empty_flow`), what any process pays
  before payops' own work; `beyond_settle_s` sets the warm process against it.

Pre-flight is timed on its own (the flow's `preflight` phase) with the request rate it reached and its 429s.

``--against-rows N`` (`benchmarks.scale_runs`): a cold run of N rows (the baseline size) and a cold run of
``--rows``, each csv, each against its own emulator; per run wall, phases, peak RSS per phase, API calls per
second; target: the ``--rows`` run's peak RSS within 50 MB of the baseline's. No naive client.

``--kill-mid-run`` (`benchmarks.exactly_once`): the flow SIGKILLed once the service holds ``--kill-at`` of the
sheet's money, run again with the same label to the end; then every row's reference must be paid exactly
once, read back through the API.

``--through-cli`` (`benchmarks.through_cli`): cold and warm as an operator runs them, each one `payops
payouts SHEET --json` command (a token, nothing else) through `payops serve`, against one emulator (the warm
run meets the cold run's payouts there), then the naive script against it; wall from exec to exit.
``--history N``: every emulator starts holding N delivered payouts of the day before (`payops sandbox
--history`), a service with a past.

Usage: python benchmarks/payouts_e2e.py [--rows 2000] [--format xlsx|csv] [--latency-ms MS]
       [--rate-limit RPS] [--baseline-rows N] [--history N]
       [--against-rows N | --kill-mid-run [--kill-at 0.3] | --through-cli] [--poll-deadline-s S]

``--latency-ms`` delays every emulator answer (a network round trip); ``--rate-limit`` makes the emulator
answer 429 with Retry-After above that many requests per second per credential. ``--baseline-rows`` runs the
naive client on fewer rows and scales its time to ``--rows`` (its cost is linear in rows). ``--rows`` above
an xlsx sheet's 1,048,575 rows writes csv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from payops.deployments.demo import unattended_home  # noqa: E402

from benchmarks.empty_flow import empty_flow_floor  # noqa: E402
from benchmarks.emulator import fresh_emulator  # noqa: E402
from benchmarks.exactly_once import KILL_AT, exactly_once  # noqa: E402
from benchmarks.flow_process import run_flow_process  # noqa: E402
from benchmarks.payops_server import payops_server  # noqa: E402
from benchmarks.payroll import XLSX_MAX_ROWS, SheetFile, cycle_sheet, iter_payees, iter_payroll  # noqa: E402
from benchmarks.scale_runs import cold_run, compare  # noqa: E402
from benchmarks.through_cli import operator_run  # noqa: E402

FINAL = {"delivered", "failed", "refunded"}
SETTLE_S = 1.5
"""The emulator's settle wait: a payout is final this long after it was accepted (`start_sandbox`'s
--delivery-delay)."""
WARM_PROCESS_TARGET_S = 1.5
"""The loopback warm 2,000-row process's target: this long beyond the settle wait, at most."""
NAIVE_CONCURRENCY = 16


async def naive(rows: list[list[str]]) -> dict:
    """One POST per row, then GET each payout until final, `NAIVE_CONCURRENCY` requests at a time."""
    from payops.connectors.payments import PaymentsClient, PaymentsSettings

    sem = asyncio.Semaphore(NAIVE_CONCURRENCY)
    t0 = time.perf_counter()
    async with PaymentsClient(PaymentsSettings()) as client:

        async def post(r: list[str]) -> str:
            async with sem:
                p = await client.payouts.create(
                    reference=f"naive-{r[0]}",
                    amount=Decimal(r[2]),
                    currency=r[3],
                    provider=r[4],
                    destination={"type": r[5], "value": r[6]},
                    idempotency_key=f"naive-{r[0]}",
                )
            return p.reference

        async def final(ref: str) -> bool:
            async with sem:
                return (await client.payouts.get(ref)).status in FINAL

        pending = set(await asyncio.gather(*(post(r) for r in rows)))
        while pending:
            refs = sorted(pending)
            done = await asyncio.gather(*(final(ref) for ref in refs))
            pending -= {ref for ref, d in zip(refs, done, strict=True) if d}
            if pending:
                await asyncio.sleep(0.5)
        calls = dict(client.api_calls)
    return {
        "wall_s": round(time.perf_counter() - t0, 2),
        "api_calls_total": sum(calls.values()),
        "api_calls": calls,
    }


def poll_deadline_for(rows: int) -> float:
    """The flow's poll deadline: 30 minutes, or 10 ms a row when longer (a million rows: 10,000 s)."""
    return max(1800.0, rows / 100)


@contextmanager
def prefect_server(home: Path) -> Iterator[str]:
    """A Prefect API for the flow processes (started before any timing: its ~20 s start is not the flow's
    cost), in a payops home of the benchmark's own; it dies with this process."""
    from payops.deployments.prefect_server import prefect_api
    from payops.store import PayopsSettings

    os.environ.pop("PAYOPS_DATABASE_URL", None)
    os.environ.update(unattended_home(home, operator=None))  # its approval policy stated: none
    with prefect_api(PayopsSettings.from_env(), say=lambda line: print(line, file=sys.stderr)) as url:
        yield url


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument(
        "--format",
        choices=["xlsx", "csv"],
        default=None,
        help="the sheets' format (default xlsx; csv with --against-rows or above 1,048,575 rows)",
    )
    ap.add_argument(
        "--baseline-rows",
        type=int,
        default=None,
        help="rows for the naive client, its time scaled to --rows (default: --rows; 0: no baseline)",
    )
    ap.add_argument("--latency-ms", type=int, default=0, help="emulated network latency per API request")
    ap.add_argument("--rate-limit", type=float, default=None, help="emulator's requests/s per credential")
    ap.add_argument(
        "--payops-home",
        help="keep the lookup cache here between benchmark runs (default: a new, empty one per run)",
    )
    ap.add_argument(
        "--warm-only",
        action="store_true",
        help="skip the cold run: the cache in --payops-home must hold the payees (from an earlier run)",
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--against-rows",
        type=int,
        metavar="N",
        help="scale mode: a cold csv run of N rows, then one of --rows, each against its own emulator",
    )
    mode.add_argument(
        "--kill-mid-run",
        action="store_true",
        help="SIGKILL the flow mid-send, run it again with the same label, check every row paid once",
    )
    ap.add_argument(
        "--kill-at",
        type=float,
        default=KILL_AT,
        help=f"with --kill-mid-run: the share of the sheet's money the service holds at the kill ({KILL_AT})",
    )
    ap.add_argument(
        "--history",
        type=int,
        default=0,
        metavar="N",
        help="the service already holds N transactions of an earlier day (each emulator, before any timing)",
    )
    ap.add_argument(
        "--through-cli",
        action="store_true",
        help="cold and warm as an operator runs them: `payops payouts` through a payops server, one emulator",
    )
    ap.add_argument(
        "--poll-deadline-s",
        type=float,
        default=None,
        help="the flow's poll deadline (default: 1800 s, or 10 ms a row when longer)",
    )
    args = ap.parse_args(argv)
    if args.format is None:
        args.format = "csv" if args.against_rows else "xlsx"
    if args.format == "xlsx" and max(args.rows, args.against_rows or 0) > XLSX_MAX_ROWS:
        print(
            f"--rows {args.rows:,}: an xlsx sheet holds at most {XLSX_MAX_ROWS:,} rows; writing csv instead",
            file=sys.stderr,
        )
        args.format = "csv"
    if args.poll_deadline_s is None:
        args.poll_deadline_s = poll_deadline_for(max(args.rows, args.against_rows or 0))
    return args


def header(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "rows": args.rows,
        "history": args.history,
        "format": args.format,
        "latency_ms": args.latency_ms,
        "emulator_rate_limit": args.rate_limit,
        "poll_deadline_s": args.poll_deadline_s,
        "sheet": "realistic: names on every row (~97% match), distinct numbers, amounts 20-150 with cents",
    }


def scale(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """`--against-rows`: the baseline size and ``--rows``, each cold, each against its own emulator."""

    def in_emulator(sheet: SheetFile, label: str, reports: str) -> dict[str, Any]:
        with fresh_emulator(sheet.amount_total, args.latency_ms, args.rate_limit):
            return run_flow_process(sheet.path, label, reports, args.poll_deadline_s)

    with prefect_server(tmp / "payops-home"):
        base = cold_run(tmp, args.against_rows, args.format, in_emulator)
        big = cold_run(tmp, args.rows, args.format, in_emulator)
    return {
        **header(args, "scale"),
        "against_rows": args.against_rows,
        "load_average": os.getloadavg(),
        "baseline": base,
        "rows_run": big,
        **compare(base, big),
    }


def kill_mid_run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """`--kill-mid-run`: kill mid-send, re-run with the same label, read the service's payouts back."""
    sheet = cycle_sheet(tmp, "kill", args.format, args.rows, "C1", seed=1)
    with (
        prefect_server(tmp / "payops-home"),
        fresh_emulator(sheet.amount_total, args.latency_ms, args.rate_limit),
    ):
        result = exactly_once(
            sheet, "C1", "bench-kill", str(tmp / "reports"), args.poll_deadline_s, args.kill_at
        )
    return {
        **header(args, "kill_mid_run"),
        "kill_at": args.kill_at,
        "sheet_written": sheet.figures(),
        "load_average": os.getloadavg(),
        **result,
    }


def cold_and_warm(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The default mode: cold and warm flow runs, and the naive client."""
    n = args.rows
    nb = n if args.baseline_rows is None else args.baseline_rows
    home = Path(args.payops_home or tmp / "payops-home")  # empty by default
    cold_sheet = cycle_sheet(tmp, "cycle1", args.format, n, "C1", seed=1)
    warm_sheet = cycle_sheet(tmp, "cycle2", args.format, n, "C2", seed=2)
    reports = str(tmp / "reports")

    def flow(sheet: SheetFile, label: str) -> dict[str, Any]:
        with fresh_emulator(sheet.amount_total, args.latency_ms, args.rate_limit, args.history):
            return run_flow_process(sheet.path, label, reports, args.poll_deadline_s)

    fixed_cost_target = not args.latency_ms and n <= 2000
    with prefect_server(home):
        cold = None if args.warm_only else flow(cold_sheet, "bench-c1")
        warm = flow(warm_sheet, "bench-c2")
        floor = empty_flow_floor() if fixed_cost_target else None
    base = None
    if nb:
        baseline_rows = list(iter_payroll(iter_payees(nb), "C1", seed=1))
        total = sum((Decimal(r[2]) for r in baseline_rows), Decimal(0))
        with fresh_emulator(total, args.latency_ms, args.rate_limit, args.history):
            base = asyncio.run(naive(baseline_rows))
    first = cold or warm  # the run that met the service with the most requests
    pre_rate = (first["preflight"]["rate_limit"] or {}).get("achieved_per_s") or 0
    total_429 = (first["rate_limit"] or {}).get("throttled_429", 0)
    total_requests = (first["rate_limit"] or {}).get("acquires", 0) or 1
    out: dict = {
        **header(args, "cold_warm"),
        "sheets_written": {"cold": cold_sheet.figures(), "warm": warm_sheet.figures()},
        "load_average": os.getloadavg(),
        "cold": cold,
        "warm": warm,
        "peak_rss_mb": {"cold": cold and cold["peak_rss_mb"], "warm": warm["peak_rss_mb"]},
        "ratios": {"first_run_429_share": round(total_429 / total_requests, 4)},
        "targets": {},
    }
    out["beyond_settle_s"] = {
        "warm_flow": round(warm["wall_s"] - SETTLE_S, 2),
        "warm_process": round(warm["process_s"] - SETTLE_S, 2),
    }
    if fixed_cost_target:
        within = warm["process_s"] - SETTLE_S <= WARM_PROCESS_TARGET_S
        out["targets"]["warm_process_within_1_5s_of_settle"] = within
    if floor is not None:
        out["prefect_floor"] = {**floor, "what": "an empty Prefect flow process (benchmarks/empty_flow.py)"}
        beyond = out["beyond_settle_s"]
        beyond["warm_process_over_prefect_floor"] = round(warm["process_s"] - SETTLE_S - floor["median_s"], 2)
        beyond["left_for_payops_by_the_target"] = round(WARM_PROCESS_TARGET_S - floor["median_s"], 2)
    if n >= 100_000:
        out["targets"]["warm_report_le_8s"] = warm["phase_durations_s"].get("report", 1e9) <= 8
        out["targets"]["warm_peak_rss_le_400mb"] = warm["peak_rss_mb"] <= 400
    if base is not None and cold is not None:
        base_wall = base["wall_s"] * n / nb
        base_calls = base["api_calls_total"] * n / nb
        out["naive_16way"] = {**base, "rows": nb, "wall_s_scaled_to_rows": round(base_wall, 2)}
        out["ratios"].update(
            {
                "naive_wall_over_cold_wall": round(base_wall / cold["wall_s"], 2),
                "naive_wall_over_warm_wall": round(base_wall / warm["wall_s"], 2),
                "naive_calls_over_warm_calls": round(base_calls / max(1, warm["api_calls_total"]), 1),
            }
        )
        out["targets"].update(
            {
                "cold_wall_le_naive": cold["wall_s"] <= base_wall,
                "warm_2x_faster_than_naive": base_wall >= 2 * warm["wall_s"],
                "warm_3x_fewer_calls": base_calls >= 3 * warm["api_calls_total"],
            }
        )
        if args.latency_ms and not args.rate_limit:  # with a rate limit the targets are its pace and 429s
            out["targets"]["cold_3x_faster_than_naive"] = base_wall >= 3 * cold["wall_s"]
            out["targets"]["warm_6x_faster_than_naive"] = base_wall >= 6 * warm["wall_s"]
    if args.rate_limit:
        out["targets"]["429s_le_2pct"] = total_429 / total_requests <= 0.02
        out["targets"]["preflight_ge_90pct_of_limit"] = pre_rate >= 0.9 * args.rate_limit
    return out


def through_cli(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """`--through-cli`: one emulator (holding ``--history`` earlier transactions), one payops server; the
    cold and the warm run each one `payops payouts` command of an operator; the naive script on the same
    emulator after them. Targets: cold 3x, warm 6x faster than the naive script."""
    n = args.rows
    cold_sheet = cycle_sheet(tmp, "cycle1", args.format, n, "C1", seed=1)
    warm_sheet = cycle_sheet(tmp, "cycle2", args.format, n, "C2", seed=2)
    rows = list(iter_payroll(iter_payees(n), "C3", seed=3))
    total = cold_sheet.amount_total + warm_sheet.amount_total + sum((Decimal(r[2]) for r in rows), Decimal(0))
    with fresh_emulator(total, args.latency_ms, args.rate_limit, args.history) as service:
        with payops_server(tmp, {**os.environ, **service}) as server:
            cold = operator_run(cold_sheet.path, "bench-c1", server["operator_env"])
            warm = operator_run(warm_sheet.path, "bench-c2", server["operator_env"])
        base = asyncio.run(naive(rows))
    out = {
        **header(args, "through_cli"),
        "what": "`payops payouts SHEET --json` with a token, through `payops serve`; wall from exec to exit",
        "load_average": os.getloadavg(),
        "cold": cold,
        "warm": warm,
        "naive_16way": base,
        "ratios": {
            "naive_wall_over_cold_wall": round(base["wall_s"] / cold["wall_s"], 2),
            "naive_wall_over_warm_wall": round(base["wall_s"] / warm["wall_s"], 2),
        },
        "targets": {
            "cold_3x_faster_than_naive": base["wall_s"] >= 3 * cold["wall_s"],
            "warm_6x_faster_than_naive": base["wall_s"] >= 6 * warm["wall_s"],
        },
    }
    return out


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("PREFECT_HOME", str(ROOT / ".prefect-home"))
    with tempfile.TemporaryDirectory() as tmp:
        if args.against_rows:
            out = scale(args, Path(tmp))
        elif args.kill_mid_run:
            out = kill_mid_run(args, Path(tmp))
        elif args.through_cli:
            out = through_cli(args, Path(tmp))
        else:
            out = cold_and_warm(args, Path(tmp))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
