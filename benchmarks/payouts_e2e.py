"""Benchmark: a realistic payroll through the payout flow, cold and warm cache, against a naive 16-way client.

The sheet is what a payroll looks like: a payee name on every row (most match the emulator's directory of
holder names, about 2% do not, 1% only partly), a distinct mobile money number per row, amounts with random
cents. One run measures, each against its own fresh emulator (`payops sandbox`, its own process):

* `cold`: the flow on that sheet with an empty lookup cache (a new PAYOPS_HOME);
* `warm`: the same payees with new amounts and references, next cycle's payroll, with the cache the cold
  run filled;
* `naive`: one `POST /v1/payouts` per row, then `GET` each payout until final, 16 requests at a time (what a
  per-row integration does; it skips the pre-flight).

Pre-flight is timed on its own (the flow's `preflight` phase) with the request rate it reached and its 429s.

Usage: python benchmarks/payouts_e2e.py [--rows 2000] [--latency-ms MS] [--rate-limit RPS] [--baseline-rows N]

``--latency-ms`` delays every emulator answer (a network round trip); ``--rate-limit`` makes the emulator
answer 429 with Retry-After above that many requests per second per credential. ``--baseline-rows`` runs the
naive client on fewer rows and scales its time to ``--rows`` (its cost is linear in rows).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sheets import TEST_ENDINGS, write_sheet  # noqa: E402
from deployments.demo import free_port, read_env_file, start_sandbox  # noqa: E402
from sandbox.engine.party_lookups import FIRST_NAMES, SURNAMES, holder_name  # noqa: E402
from tasks.child_processes import preexec_own_group_dying_with_parent  # noqa: E402

FINAL = {"delivered", "failed", "refunded"}
NAIVE_CONCURRENCY = 16


def payees(n: int, seed: int = 15) -> list[tuple[str, str]]:
    """`n` distinct (number, sheet name): 97% the directory's name (some reordered), 2% someone else's,
    1% the first name only."""
    rng = random.Random(seed)
    numbers: list[str] = []
    seen: set[str] = set()
    while len(numbers) < n:
        number = f"23324{rng.randrange(10_000_000):07d}"
        if number not in seen and number[-4:] not in TEST_ENDINGS:
            seen.add(number)
            numbers.append(number)
    out = []
    for number in numbers:
        holder = holder_name(number)
        roll = rng.random()
        if roll < 0.02:
            name = f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"
            name = name if name != holder else f"{name} Junior"
        elif roll < 0.03:
            name = holder.split()[0]
        elif roll < 0.10:
            name = " ".join(reversed(holder.upper().split()))  # surname first, capitals: still a match
        else:
            name = holder
        out.append((number, name))
    return out


def payroll(people: list[tuple[str, str]], cycle: str, seed: int) -> list[list[str]]:
    """One sheet row per payee: amounts 20.00 to 150.00 with random cents (fresh amounts per `seed`)."""
    rng = random.Random(seed)
    return [
        [
            f"{cycle}-{i:06d}",
            name,
            f"{rng.randrange(2000, 15000) / 100:.2f}",
            "GHS",
            "mtn",
            "msisdn",
            number,
            "",
        ]
        for i, (number, name) in enumerate(people)
    ]


async def naive(rows: list[list[str]]) -> dict:
    """One POST per row, then GET each payout until final, `NAIVE_CONCURRENCY` requests at a time."""
    from connectors.payments import PaymentsClient, PaymentsSettings

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

    def stop(self) -> None:
        self.phase("end")
        self._stop.set()
        self._thread.join()


def run_flow(sheet: Path, label: str, report_dir: str) -> dict:
    """The payout flow on `sheet` in this process, with the figures of its summary, CPU and RSS per phase."""
    from flows.outcomes import run_summary
    from flows.payouts import PayoutRunParams, payout_spreadsheet
    from tasks.progress import watching

    sampler = PhaseSampler()
    t0 = time.perf_counter()
    params = PayoutRunParams(source=str(sheet), label=label, report_dir=report_dir, poll_deadline_s=1800)
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
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "preflight": {
            "wall_s": s["phase_durations_s"].get("preflight"),
            "cache": pre.get("cache"),
            "name_checks": dict(pre.get("name_checks") or {}),
            "rate_limit": pre.get("rate_limit"),
            "problems": pre.get("problems"),
        },
        "payouts_by_status": s["payouts_by_status"],
        "api_calls_total": sum(calls.values()),
        "api_calls": dict(calls),
        "batches": s["batches"],
        "rate_limit": s.get("rate_limit"),
    }


def run_flow_process(sheet: Path, label: str, report_dir: str) -> dict:
    """`run_flow` in a fresh payops process (this script with ``--flow``): its peak RSS and CPU its own."""
    proc = subprocess.run(
        [sys.executable, __file__, "--flow", str(sheet), label, report_dir],
        stdout=subprocess.PIPE,
        check=True,
        preexec_fn=preexec_own_group_dying_with_parent(),  # noqa: PLW1509 - setsid + pdeathsig only
    )
    return json.loads(proc.stdout)


def with_sandbox(latency_ms: int, rate_limit: float | None, fn, *args):
    port = free_port()
    options = ["--rate-limit", str(rate_limit)] if rate_limit else []
    with tempfile.TemporaryDirectory() as tmp:
        env_file = Path(tmp) / "env"
        proc = start_sandbox(port, env_file, latency_ms, *options, start_timeout_s=120)  # a busy machine
        try:
            os.environ.update(read_env_file(env_file))
            return fn(*args)
        finally:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2000)
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
    ap.add_argument("--flow", nargs=3, metavar=("SHEET", "LABEL", "REPORTS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("PREFECT_HOME", str(ROOT / ".prefect-home"))
    if args.flow:  # the payops process of one run (run_flow_process)
        sheet, label, reports = args.flow
        print(json.dumps(run_flow(Path(sheet), label, reports)))
        return
    n = args.rows
    nb = n if args.baseline_rows is None else args.baseline_rows
    people = payees(n)
    baseline_rows = payroll(people[:nb], "C1", seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAYOPS_HOME"] = args.payops_home or str(Path(tmp) / "payops-home")  # empty by default
        os.environ.pop("PAYOPS_DATABASE_URL", None)
        cold_sheet = write_sheet(Path(tmp) / "cycle1.xlsx", payroll(people, "C1", seed=1))
        warm_sheet = write_sheet(Path(tmp) / "cycle2.xlsx", payroll(people, "C2", seed=2))
        del people
        # Start a Prefect server before timing (its ~20 s start is not the flow's cost); it dies with us.
        from deployments.prefect_server import prefect_api

        reports = str(Path(tmp) / "reports")
        with prefect_api(say=lambda line: print(line, file=sys.stderr)):
            cold = None
            if not args.warm_only:
                cold = with_sandbox(
                    args.latency_ms, args.rate_limit, run_flow_process, cold_sheet, "bench-c1", reports
                )
            warm = with_sandbox(
                args.latency_ms, args.rate_limit, run_flow_process, warm_sheet, "bench-c2", reports
            )
        base = None
        if nb:
            base = with_sandbox(args.latency_ms, args.rate_limit, lambda: asyncio.run(naive(baseline_rows)))
    first = cold or warm  # the run that met the service with the most requests
    pre_rate = (first["preflight"]["rate_limit"] or {}).get("achieved_per_s") or 0
    total_429 = (first["rate_limit"] or {}).get("throttled_429", 0)
    total_requests = (first["rate_limit"] or {}).get("acquires", 0) or 1
    out: dict = {
        "rows": n,
        "latency_ms": args.latency_ms,
        "emulator_rate_limit": args.rate_limit,
        "sheet": "realistic: names on every row (~97% match), distinct numbers, amounts 20-150 with cents",
        "load_average": os.getloadavg(),
        "cold": cold,
        "warm": warm,
        "peak_rss_mb": {"cold": cold and cold["peak_rss_mb"], "warm": warm["peak_rss_mb"]},
        "ratios": {"first_run_429_share": round(total_429 / total_requests, 4)},
        "targets": {},
    }
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
        if args.latency_ms:
            out["targets"]["cold_3x_faster_than_naive"] = base_wall >= 3 * cold["wall_s"]
    if args.rate_limit:
        out["targets"]["429s_le_5pct"] = total_429 / total_requests <= 0.05
        out["targets"]["preflight_ge_80pct_of_limit"] = pre_rate >= 0.8 * args.rate_limit
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
