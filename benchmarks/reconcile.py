"""Benchmark: the daily close and a run's reconciliation of N transactions (paged at 100 from the emulator)
against their floors and a naive per-row alternative, in the same run; print JSON.

One emulator (`payops sandbox`, its own process, ``--latency-ms`` added to every answer) holds the day: N
payouts sent in batches of 100 (amounts with cents, one in 50 failing), after a first close took the baseline
snapshot; payops' database records them as one approved run (``bench``). The database is copied then, and put
back before each close, so every close closes the same day. Each variant runs in a fresh payops process, so
each has its own peak RSS and CPU; the client is the flows' (the shared adaptive rate, 1,000/s at most, and
the in-flight sizing):

* ``paging``: reading every page of the window cursor by cursor, doing nothing with them: the floor the API's
  paging sets for one reader (at a latency, run once: it is pages x latency);
* ``sliced``: every page of the window read in slices at once (`Transactions.read_window`, at most
  `READS_AT_ONCE` requests out), doing nothing with them; at a latency the same cuts are then replayed
  against the window's creation times held in memory, each request answered after exactly the latency and
  costing no CPU (`replay_slices`): what the slicing costs by itself, this machine aside;
* ``close``: the daily close as `reconcile-day` runs it, without Prefect: `tasks.ledger.daily_close.run_close`
  (the window in slices read at once, each page made columns and run labels as it arrives, pandas over
  integer cents, attribution, the store written), then its reports (`write_close_reports`: xlsx, csv and
  JSON of every transaction), timed as a phase of their own;
* ``run``: `reconcile_run` of the recorded run (its N payouts read back in slices and matched);
* ``naive``: per row, as a script would: every page to learn the references, then a GET per payout, a
  database look-up per reference and Decimal sums row by row. It runs on ``--naive-rows`` transactions (a
  full run would take hours; 0 skips it) and its per-row time is reported with the figure it extrapolates to.

The variants alternate ``--repeat`` times; medians are compared. **Targets**: on loopback the close's wall
time within 1.2x the cursor-by-cursor paging's (`TARGET_CLOSE_OVER_PAGING`); at a latency, the close and the
run's reconciliation each within 1.3x the latency floor (`TARGET_OVER_LATENCY_FLOOR`): pages / requests in
flight x latency, the pages being N / 100 and the requests in flight `READS_AT_ONCE`. The reports are a later
phase of `reconcile-day` whose CPU no page hides: measured, and the whole flow's figure reported, beside it.
At a latency each variant's CPU floor is stated beside the latency floor: its own CPU (one Python process
uses one core) or, when more, its and the emulator's CPU over this machine's cores (the emulator's read from
its process around each variant); where that floor lies above the target, this machine cannot meet it.

Usage: python benchmarks/reconcile.py [--transactions 100000] [--latency-ms 0] [--naive-rows 2000]
       [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from payops.deployments.demo import free_port, read_env_file, start_sandbox  # noqa: E402
from payops.tasks.runtime.child_processes import preexec_own_group_dying_with_parent  # noqa: E402

from benchmarks.webhooks import process_cpu_s  # noqa: E402

TARGET_CLOSE_OVER_PAGING = 1.2
TARGET_OVER_LATENCY_FLOOR = 1.3
RUN_LABEL = "bench"


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _client():
    """A client as the flows open it: the adaptive shared rate (no Prefect limit here) starting at the pace
    the last variant learned (`tasks.runtime.service_pace`; `keep_pace` when the variant ends), its
    transport's in-flight sizing, and the process set for runs as every flow's `open_clients` sets it."""
    import httpx
    from payops.connectors.payments import PaymentsClient, PaymentsSettings
    from payops.flows.run_params import DEFAULT_RATE_PER_S
    from payops.store import PayopsSettings
    from payops.tasks.runtime.clients import PooledTransport, service_key
    from payops.tasks.runtime.inflight import MAX_IN_FLIGHT
    from payops.tasks.runtime.memory import set_for_runs
    from payops.tasks.runtime.ratelimit import RateLimitedTransport, adaptive_rate
    from payops.tasks.runtime.service_pace import remembered

    set_for_runs()
    pool = PooledTransport(limits=httpx.Limits(max_connections=MAX_IN_FLIGHT))
    settings = PaymentsSettings()
    home = PayopsSettings.from_env().home_dir()
    limiter = adaptive_rate(DEFAULT_RATE_PER_S, remembered(service_key(settings), home=home))
    transport = RateLimitedTransport(pool, limiter)
    return PaymentsClient(settings, transport=transport), transport


async def seed(n: int) -> dict:
    """Fund the wallet, take the baseline close, send n payouts in batches of 100, wait for them final."""
    import httpx
    from payops.store import PayopsSettings, upgrade_database
    from payops.store.reconciliation import ReconciliationStore
    from payops.tasks.ledger.daily_close import run_close

    base = os.environ["PAYOPS_BASE_URL"]
    httpx.post(f"{base}/_sandbox/businesses/demo/test/wallet/fund", json={"amount": str(n * 40)}, timeout=30)
    limits = {"GHS": {"perTransaction": "100000.00", "daily": str(n * 100), "monthly": str(n * 100)}}
    httpx.put(f"{base}/_sandbox/businesses/demo/test/limits", json={"limits": limits}, timeout=30)
    engine = upgrade_database(PayopsSettings.from_env())  # the benchmark's own new home
    store = ReconciliationStore(engine)
    t0 = time.perf_counter()
    sent_from = datetime.now(UTC)
    client, _transport = _client()
    async with client:
        baseline = await run_close(client, store, "bench-0", "benchmark")
        sem = asyncio.Semaphore(16)

        async def batch(b: int) -> None:
            items = [
                {
                    "reference": _reference(b * 100 + i),
                    "amount": _amount(b * 100 + i),
                    "currency": "GHS",
                    "provider": "mtn",
                    "destination": {
                        "type": "msisdn",
                        "value": f"23324{b * 100 + i:07d}"[:-4] + ("0002" if i % 50 == 7 else "9999"),
                    },
                }
                for i in range(min(100, n - b * 100))
            ]
            async with sem:
                await client.payout_batches.create(reference=f"bench-b{b}", items=items)

        await asyncio.gather(*(batch(b) for b in range((n + 99) // 100)))
    sent = time.perf_counter() - t0
    record_run(store, n, sent_from, datetime.now(UTC))
    await asyncio.sleep(3)  # every payout final (delivery delay 0.2 s)
    engine.dispose()
    return {"seed_s": round(sent, 1), "baseline_status": baseline.result.status}


def _reference(i: int) -> str:
    return f"{RUN_LABEL}-r{i + 2}"


def _amount(i: int) -> str:
    return f"{10 + i % 23}.{(i // 100 + i % 100) % 100:02d}"


def record_run(store: Any, n: int, sent_from: datetime, ended: datetime) -> None:
    """The seeded payouts as one approved run, ``bench`` (each row's fee bound wide: only timing counts)."""
    from payops.store.reconciliation import IntendedPayout

    part = 50_000
    for start in range(0, n, part):
        rows = [
            IntendedPayout(_reference(i), i + 2, _amount(i), "GHS", "0.00", "100.00")
            for i in range(start, min(n, start + part))
        ]
        store.record_intent(RUN_LABEL, sent_from, rows, first=start == 0)
    store.mark_ended(RUN_LABEL, ended)


async def variant(name: str, naive_rows: int, latency_ms: int = 0) -> dict:
    from payops.store import PayopsSettings, open_database
    from payops.store.reconciliation import ReconciliationStore
    from payops.tasks.ledger.daily_close import run_close, write_close_reports
    from payops.tasks.ledger.run_reconciliation import READS_AT_ONCE, cents, reconcile_run, wallet_effect
    from payops.tasks.runtime.clients import keep_pace

    engine = open_database(PayopsSettings.from_env())  # seeded (and upgraded) by the parent
    store = ReconciliationStore(engine)
    since = store.checks("day", "bench-0", 1)[0].taken_at  # the baseline close (the close variant adds one)
    rss_before = _peak_rss_mb()
    cpu0, t0 = _cpu(), time.perf_counter()
    out: dict = {"variant": name}
    client, transport = _client()
    async with client:
        if name == "paging":
            count = 0
            async for _tx in client.transactions.iterate(from_=since, limit=100):
                count += 1
            out["transactions"] = count
        elif name == "sliced":
            gate = transport.in_flight(READS_AT_ONCE)
            created: list[datetime] = []
            until = datetime.now(UTC)
            read = await client.transactions.read_window(
                lambda page: created.extend(tx.created_at for tx in page if tx.created_at),
                from_=since,
                to=until,
                width=lambda: gate.size,
                gate=lambda: gate,
            )
            out |= {"transactions": len(created), "slices": read.slices, "widest": read.widest}
            out["sliced_wall_s"], out["sliced_cpu_s"] = (
                round(time.perf_counter() - t0, 3),
                round(_cpu() - cpu0, 3),
            )
            if latency_ms:
                out["replayed"] = await replay_slices(created, since, until, latency_ms, gate.size)
        elif name == "run":
            check = await reconcile_run(client, store, RUN_LABEL, "benchmark")
            out |= {
                "transactions": check.summary.rows,
                "matched": check.summary.matched,
                "status": check.summary.status,
                "differences": len(check.differences),
            }
        elif name == "close":
            done = await run_close(
                client, store, "bench-1", "benchmark", gate=transport.in_flight(READS_AT_ONCE)
            )
            closed, closed_cpu = time.perf_counter(), _cpu()
            with tempfile.TemporaryDirectory() as reports:
                files = write_close_reports(reports, "close", done.result, done.result.summary())
                report_mb = sum(Path(f).stat().st_size for f in files.values()) / 1e6
            out |= {
                "transactions": len(done.result.transactions),
                "status": done.result.status,
                "differences": len(done.result.differences),
                "unexplained": {c: b.get("unexplained") for c, b in done.result.balances.items()},
                "report": {
                    "wall_s": round(time.perf_counter() - closed, 3),
                    "cpu_s": round(_cpu() - closed_cpu, 3),
                    "files_mb": round(report_mb, 1),
                },
                "close_wall_s": round(closed - t0, 3),
                "close_cpu_s": round(closed_cpu - cpu0, 3),
            }
        else:
            refs = []
            async for tx in client.transactions.iterate(from_=since, limit=100):
                refs.append(tx.reference)
            listed = time.perf_counter() - t0
            total, labels = Decimal(0), Counter()
            for ref in refs[:naive_rows]:
                payout = await client.payouts.get(ref)
                total += Decimal(cents_to_text(cents(payout.payer_amount))) if wallet_effect(payout) else 0
                labels[store.labels_of([ref]).get(ref, "outside payops")] += 1
            per_row = (time.perf_counter() - t0 - listed) / max(1, min(naive_rows, len(refs)))
            out |= {
                "transactions": len(refs),
                "rows_processed": min(naive_rows, len(refs)),
                "per_row_ms": round(per_row * 1000, 3),
                "extrapolated_wall_s": round(listed + per_row * len(refs), 1),
            }
        out["api_calls"] = dict(sorted(client.api_calls.items()))
        out["limiter"] = transport.stats.figures().model_dump()
        out["limiter"]["started_at_per_s"] = transport.limiter.started_at
    keep_pace(client.settings, transport, PayopsSettings.from_env().home_dir())
    ended = round(time.perf_counter() - t0, 3), round(_cpu() - cpu0, 3)
    out["wall_s"] = out.pop("close_wall_s", out.pop("sliced_wall_s", ended[0]))
    out["cpu_s"] = out.pop("close_cpu_s", out.pop("sliced_cpu_s", ended[1]))
    out["peak_rss_mb"] = _peak_rss_mb()
    out["rss_before_mb"] = rss_before
    engine.dispose()
    return out


async def replay_slices(
    created: list[datetime], low: datetime, high: datetime, latency_ms: int, width: int
) -> dict:
    """`read_sliced` over ``[low, high)`` against these creation times held newest first, as the service
    pages them (100 a page, ``from``/``to`` filters, a cursor), every request answered after exactly the
    latency: the wall time and requests the cuts cost by themselves, with no CPU or queueing of this
    machine's (the client's, the emulator's) in them."""
    from bisect import bisect_left

    from payops.connectors.payments._slices import read_sliced
    from payops.tasks.ledger.run_reconciliation import PAGE

    times = sorted(created)

    async def fetch(start: datetime, end: datetime, cursor: str | None) -> tuple[list[datetime], str | None]:
        await asyncio.sleep(latency_ms / 1000)
        top = bisect_left(times, end) if cursor is None else int(cursor)
        bottom = max(bisect_left(times, start), top - PAGE)
        page = times[bottom:top][::-1]
        return page, (str(bottom) if len(page) == PAGE and bottom > bisect_left(times, start) else None)

    t0 = time.perf_counter()
    read = await read_sliced(
        fetch, [(low, high)], lambda _page: None, width=lambda: width, page_size=PAGE, created_at=lambda t: t
    )
    wall = time.perf_counter() - t0
    assert read.items == len(times), (read.items, len(times))  # every item once, as in the real read
    return {"wall_s": round(wall, 3), "requests": read.requests, "slices": read.slices}


def cents_to_text(value: int) -> str:
    return f"{Decimal(value).scaleb(-2):.2f}"


def run_variant(name: str, naive_rows: int, emulator_pid: int, latency_ms: int) -> dict:
    """One variant in a process of its own, with the CPU the emulator spent meanwhile (answering it)."""
    emulator_before = process_cpu_s(emulator_pid)
    proc = subprocess.run(
        [sys.executable, __file__, "--variant", name, "--naive-rows", str(naive_rows)]
        + ["--latency-ms", str(latency_ms)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        check=True,
        preexec_fn=preexec_own_group_dying_with_parent(),  # noqa: PLW1509 - setsid + pdeathsig only
    )
    return json.loads(proc.stdout) | {
        "emulator_cpu_s": round(process_cpu_s(emulator_pid) - emulator_before, 3)
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=100_000)
    ap.add_argument("--latency-ms", type=int, default=0, help="added to every emulator answer")
    ap.add_argument(
        "--naive-rows",
        type=int,
        default=None,
        help="naive script rows (default 2,000; 0 at a latency)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="the variants alternate this many times")
    ap.add_argument("--variant", choices=["paging", "sliced", "close", "run", "naive"])
    args = ap.parse_args()
    naive_rows = args.naive_rows if args.naive_rows is not None else (0 if args.latency_ms else 2_000)
    if args.variant:
        print(json.dumps(asyncio.run(variant(args.variant, naive_rows, args.latency_ms))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAYOPS_HOME"] = tmp
        database = Path(tmp) / "payops.sqlite3"
        os.environ["PAYOPS_DATABASE_URL"] = f"sqlite:///{database}"
        env_file = Path(tmp) / "env"
        proc = start_sandbox(
            free_port(), env_file, args.latency_ms, "--delivery-delay", "0.2", start_timeout_s=120
        )
        try:
            os.environ.update(read_env_file(env_file))
            seeded = asyncio.run(seed(args.transactions))
            shutil.copy(database, Path(tmp) / "baseline.sqlite3")
            results = []
            for k in range(args.repeat):  # alternating, so a change in the machine's load hits them all
                if k == 0 or not args.latency_ms:  # at a latency, cursor by cursor is pages x latency
                    results.append(run_variant("paging", naive_rows, proc.pid, args.latency_ms))
                for name in ("sliced", "close", "run"):
                    shutil.copy(Path(tmp) / "baseline.sqlite3", database)  # the same day to close each time
                    results.append(run_variant(name, naive_rows, proc.pid, args.latency_ms))
            if naive_rows:
                results.append(run_variant("naive", naive_rows, proc.pid, args.latency_ms))
        finally:
            proc.terminate()
            proc.wait(10)
    summary = {
        "transactions": args.transactions,
        "latency_ms": args.latency_ms,
        **seeded,
        **summarise(results, args.transactions, args.latency_ms),
        "results": results,
    }
    print(json.dumps(summary, indent=2))


def latency_floor_s(transactions: int, latency_ms: int) -> float:
    """Pages / requests in flight x latency: the least a window's read takes at this latency."""
    from payops.tasks.ledger.run_reconciliation import PAGE, READS_AT_ONCE

    pages = -(-transactions // PAGE)
    return round(pages / READS_AT_ONCE * latency_ms / 1000, 3)


def summarise(results: list[dict], transactions: int, latency_ms: int) -> dict:
    """Medians of each variant, their ratios to the floors, the targets, the naive script's extrapolation."""

    def rows(name: str) -> list[dict]:
        return [r for r in results if r["variant"] == name]

    def median(name: str, *path: str) -> float:
        values = []
        for r in rows(name):
            for key in path:
                r = r[key]
            values.append(r)
        return round(statistics.median(values), 3)

    def figures(name: str) -> dict:
        first = rows(name)[0]
        return {
            "wall_s": median(name, "wall_s"),
            "cpu_s": median(name, "cpu_s"),
            "emulator_cpu_s": median(name, "emulator_cpu_s"),
            "api_calls": sum(first["api_calls"].values()),
            "peak_rss_mb": median(name, "peak_rss_mb"),
            "in_flight_max": first["limiter"]["in_flight_max"],
        }

    paging_s, close_s, run_s = median("paging", "wall_s"), median("close", "wall_s"), median("run", "wall_s")
    report_s = median("close", "report", "wall_s")
    out: dict = {
        "paging_cursor_by_cursor": figures("paging"),
        "sliced": figures("sliced"),
        "close": figures("close"),
        "run_reconciliation": figures("run"),
        "reports": {"wall_s": report_s, "cpu_s": median("close", "report", "cpu_s")},
        "close_over_paging": round(close_s / paging_s, 2),
        "close_cpu_over_paging_cpu": round(median("close", "cpu_s") / median("paging", "cpu_s"), 2),
        "close_and_reports_over_paging": round((close_s + report_s) / paging_s, 2),
        "targets": {},
    }
    if latency_ms:
        floor = latency_floor_s(transactions, latency_ms)
        out["latency_floor"] = {
            "wall_s": floor,
            "what": "pages / requests in flight (READS_AT_ONCE) x latency",
        }
        cores = os.cpu_count() or 1
        cpu_floors = {
            name: round(
                max(
                    median(name, "cpu_s"),  # one Python process: one core at most
                    (median(name, "cpu_s") + median(name, "emulator_cpu_s")) / cores,
                ),
                3,
            )
            for name in ("sliced", "close", "run")
        }
        out["cpu_floor"] = {
            "wall_s": cpu_floors,
            "what": "the client's CPU (one process, one core at most), or the client's and the emulator's "
            f"over this machine's {cores} cores when more: the least wall time their work allows here, "
            "the latency aside",
            "above_the_target": {n: f > TARGET_OVER_LATENCY_FLOOR * floor for n, f in cpu_floors.items()},
        }
        replays = [r["replayed"] for r in rows("sliced")]
        out["slices_replayed_at_the_latency"] = {
            "wall_s": round(statistics.median(r["wall_s"] for r in replays), 3),
            "requests": round(statistics.median(r["requests"] for r in replays)),
            "over_latency_floor": round(statistics.median(r["wall_s"] for r in replays) / floor, 2),
            "what": "the sliced read's cuts replayed on the window's creation times in memory, every request "
            "answered after exactly the latency, no CPU: what slicing costs by itself, this machine aside",
        }
        out["close_over_latency_floor"] = round(close_s / floor, 2)
        out["run_over_latency_floor"] = round(run_s / floor, 2)
        out["targets"] |= {
            "close_le_1_3x_latency_floor": close_s <= TARGET_OVER_LATENCY_FLOOR * floor,
            "run_le_1_3x_latency_floor": run_s <= TARGET_OVER_LATENCY_FLOOR * floor,
        }
    out["targets"]["close_le_1_2x_paging"] = close_s <= TARGET_CLOSE_OVER_PAGING * paging_s
    if rows("naive"):
        naive = rows("naive")[0]
        out["naive"] = {
            "rows_processed": naive["rows_processed"],
            "per_row_ms": naive["per_row_ms"],
            "extrapolated_wall_s": naive["extrapolated_wall_s"],
            "extrapolated": f"from {naive['rows_processed']:,} of {naive['transactions']:,} rows",
            "api_calls_for_rows_processed": sum(naive["api_calls"].values()),
        }
        out["naive_over_close_extrapolated"] = round(naive["extrapolated_wall_s"] / close_s, 1)
    return out


if __name__ == "__main__":
    main()
