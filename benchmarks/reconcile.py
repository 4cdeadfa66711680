"""Benchmark: the daily close of N transactions (paged at 100 from the emulator) against its naive per-row
alternative, in the same run; print JSON.

One emulator (`payops sandbox`, its own process, so the service builds a page while payops works on the last)
holds the day: N payouts sent in batches of 100 (amounts with cents, one in 50 failing), after a first close
took the baseline snapshot. The payops database is copied then, and put back before each close, so every close
closes the same day. Each variant runs in a fresh payops process, so each has its own peak RSS and CPU:

* ``paging``: only reading every page of the window, one after the other, doing nothing with them: the floor
  the API's paging sets;
* ``close``: the daily close as `reconcile-day` runs it, without Prefect: `tasks.ledger.daily_close.run_close`
  (pages of 100 made columns and run labels while the next page is read, pandas over integer cents,
  attribution, the store written), then its reports (`write_close_reports`: xlsx, csv and JSON of every
  transaction), timed as a phase of their own;
* ``naive``: per row, as a script would: every page to learn the references, then a GET per payout, a
  database look-up per reference and Decimal sums row by row. It runs on ``--naive-rows`` transactions (a
  full run would take hours) and its per-row time is reported with the figure it extrapolates to.

Paging and the close alternate ``--repeat`` times; medians are compared. **Target** ("bounded by paging"): the
close's wall time within 1.2x the paging floor's (`TARGET_CLOSE_OVER_PAGING`). The reports are a later phase
of `reconcile-day` whose CPU no page hides: measured, and the whole flow's figure reported, beside it.

Usage: python benchmarks/reconcile.py [--transactions 100000] [--naive-rows 2000] [--repeat 3]
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
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from payops.deployments.demo import free_port, read_env_file, start_sandbox  # noqa: E402
from payops.tasks.runtime.child_processes import preexec_own_group_dying_with_parent  # noqa: E402

TARGET_CLOSE_OVER_PAGING = 1.2


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


async def _client():
    from payops.connectors.payments import PaymentsClient, PaymentsSettings

    return PaymentsClient(PaymentsSettings())


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
    async with await _client() as client:
        baseline = await run_close(client, store, "bench-0", "benchmark")
        sem = asyncio.Semaphore(8)

        async def batch(b: int) -> None:
            items = [
                {
                    "reference": f"bench-r{b * 100 + i}",
                    "amount": f"{10 + (b * 100 + i) % 23}.{(b + i) % 100:02d}",
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
    await asyncio.sleep(3)  # every payout final (delivery delay 0.2 s)
    engine.dispose()
    return {"seed_s": round(sent, 1), "baseline_status": baseline.result.status}


async def variant(name: str, naive_rows: int) -> dict:
    from payops.store import PayopsSettings, open_database
    from payops.store.reconciliation import ReconciliationStore
    from payops.tasks.ledger.daily_close import run_close, write_close_reports
    from payops.tasks.ledger.run_reconciliation import cents, wallet_effect

    engine = open_database(PayopsSettings.from_env())  # seeded (and upgraded) by the parent
    store = ReconciliationStore(engine)
    since = store.checks("day", "bench-0", 1)[0].taken_at  # the baseline close (the close variant adds one)
    rss_before = _peak_rss_mb()
    cpu0, t0 = _cpu(), time.perf_counter()
    out: dict = {"variant": name}
    async with await _client() as client:
        if name == "paging":
            count = 0
            async for _tx in client.transactions.iterate(from_=since, limit=100):
                count += 1
            out["transactions"] = count
        elif name == "close":
            done = await run_close(client, store, "bench-1", "benchmark")
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
    out["wall_s"] = out.pop("close_wall_s", round(time.perf_counter() - t0, 3))
    out["cpu_s"] = out.pop("close_cpu_s", round(_cpu() - cpu0, 3))
    out["peak_rss_mb"] = _peak_rss_mb()
    out["rss_before_mb"] = rss_before
    engine.dispose()
    return out


def cents_to_text(value: int) -> str:
    return f"{Decimal(value).scaleb(-2):.2f}"


def run_variant(name: str, naive_rows: int) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--variant", name, "--naive-rows", str(naive_rows)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        check=True,
        preexec_fn=preexec_own_group_dying_with_parent(),  # noqa: PLW1509 - setsid + pdeathsig only
    )
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=100_000)
    ap.add_argument("--naive-rows", type=int, default=2_000)
    ap.add_argument("--repeat", type=int, default=3, help="paging and the close alternate this many times")
    ap.add_argument("--variant", choices=["paging", "close", "naive"])
    args = ap.parse_args()
    if args.variant:
        print(json.dumps(asyncio.run(variant(args.variant, args.naive_rows))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAYOPS_HOME"] = tmp
        database = Path(tmp) / "payops.sqlite3"
        os.environ["PAYOPS_DATABASE_URL"] = f"sqlite:///{database}"
        env_file = Path(tmp) / "env"
        proc = start_sandbox(free_port(), env_file, 0, "--delivery-delay", "0.2", start_timeout_s=120)
        try:
            os.environ.update(read_env_file(env_file))
            seeded = asyncio.run(seed(args.transactions))
            shutil.copy(database, Path(tmp) / "baseline.sqlite3")
            results = []
            for _ in range(args.repeat):  # alternating, so a change in the machine's load hits both
                results.append(run_variant("paging", args.naive_rows))
                shutil.copy(Path(tmp) / "baseline.sqlite3", database)  # the same day to close each time
                results.append(run_variant("close", args.naive_rows))
            results.append(run_variant("naive", args.naive_rows))
        finally:
            proc.terminate()
            proc.wait(10)
    summary = {"transactions": args.transactions, **seeded, **summarise(results), "results": results}
    print(json.dumps(summary, indent=2))


def summarise(results: list[dict]) -> dict:
    """Medians of paging and the close, their ratios, the target, the naive script's extrapolation."""
    pagings = [r for r in results if r["variant"] == "paging"]
    closes = [r for r in results if r["variant"] == "close"]
    naive = next(r for r in results if r["variant"] == "naive")

    def median(rows: list[dict], *path: str) -> float:
        values = []
        for r in rows:
            for key in path:
                r = r[key]
            values.append(r)
        return round(statistics.median(values), 3)

    paging_s, close_s = median(pagings, "wall_s"), median(closes, "wall_s")
    report_s = median(closes, "report", "wall_s")
    ratio = round(close_s / paging_s, 2)
    return {
        "paging_floor": {
            "wall_s": paging_s,
            "cpu_s": median(pagings, "cpu_s"),
            "api_calls": sum(pagings[0]["api_calls"].values()),
            "peak_rss_mb": median(pagings, "peak_rss_mb"),
        },
        "close": {
            "wall_s": close_s,
            "cpu_s": median(closes, "cpu_s"),
            "api_calls": sum(closes[0]["api_calls"].values()),
            "peak_rss_mb_with_reports": median(closes, "peak_rss_mb"),
        },
        "reports": {"wall_s": report_s, "cpu_s": median(closes, "report", "cpu_s")},
        "close_over_paging": ratio,
        "close_cpu_over_paging_cpu": round(median(closes, "cpu_s") / median(pagings, "cpu_s"), 2),
        "close_and_reports_over_paging": round((close_s + report_s) / paging_s, 2),
        "target_close_over_paging": TARGET_CLOSE_OVER_PAGING,
        "targets": {"close_le_1_2x_paging": ratio <= TARGET_CLOSE_OVER_PAGING},
        "naive": {
            "rows_processed": naive["rows_processed"],
            "per_row_ms": naive["per_row_ms"],
            "extrapolated_wall_s": naive["extrapolated_wall_s"],
            "extrapolated": f"from {naive['rows_processed']:,} of {naive['transactions']:,} rows",
            "api_calls_for_rows_processed": sum(naive["api_calls"].values()),
        },
        "naive_over_close_extrapolated": round(naive["extrapolated_wall_s"] / close_s, 1),
    }


if __name__ == "__main__":
    main()
