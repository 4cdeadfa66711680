"""Benchmark: pay N rows with the payout flow, and with a naive client, against the emulator; print JSON.

The flow sends batches of 100 and polls the transaction list; the naive baseline (measured in the same run, on
its own fresh emulator) sends one `POST /v1/payouts` per row and polls each payout with `GET` until final.
Both use the same connector client and the same emulator settings. Each emulator runs in its own process
(`payops sandbox`) so the client's figures (wall time, peak RSS) are the client's own.

Usage: python benchmarks/payouts_e2e.py [--rows 10000] [--baseline-rows N] [--latency-ms MS]

``--latency-ms`` makes the emulator answer every API request that much later (a network round trip; 0, the
default, is loopback with no delay). ``--baseline-rows`` runs the naive baseline on fewer rows and scales its
time to ``--rows`` (its cost is linear in rows: one POST and at least one GET each).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sheets import payroll_rows, write_sheet  # noqa: E402
from deployments.demo import free_port, read_env_file, start_sandbox  # noqa: E402

FINAL = {"delivered", "failed", "refunded"}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def naive(rows: list[list[str]]) -> dict:
    """One POST per row, then GET each payout until final (what a per-row integration does)."""
    from connectors.payments import PaymentsClient, PaymentsSettings

    t0 = time.perf_counter()
    async with PaymentsClient(PaymentsSettings()) as client:
        refs = []
        for r in rows:
            p = await client.payouts.create(
                reference=f"naive-{r[0]}",
                amount=Decimal(r[2]),
                currency=r[3],
                provider=r[4],
                destination={"type": r[5], "value": r[6]},
                idempotency_key=f"naive-{r[0]}",
            )
            refs.append(p.reference)
        pending = set(refs)
        while pending:
            for ref in list(pending):
                if (await client.payouts.get(ref)).status in FINAL:
                    pending.discard(ref)
            if pending:
                await asyncio.sleep(0.5)
        calls = dict(client.api_calls)
    return {
        "wall_s": round(time.perf_counter() - t0, 2),
        "api_calls": calls,
        "api_calls_total": sum(calls.values()),
    }


async def limiter_cost(n: int = 50) -> dict:
    """What one slot of the `payments-api` Prefect limit costs when no waiting is needed, vs one request."""
    import httpx
    from prefect.client.orchestration import get_client

    from tasks.ratelimit import PrefectRateLimit

    async with get_client() as client:
        await client.upsert_global_concurrency_limit_by_name(
            "payments-api-bench", limit=10_000, slot_decay_per_second=10_000
        )
    limiter = PrefectRateLimit("payments-api-bench")
    t0 = time.perf_counter()
    for _ in range(n):
        await limiter.acquire()
    acquire_ms = (time.perf_counter() - t0) / n * 1000
    async with httpx.AsyncClient(base_url=os.environ["PAYOPS_BASE_URL"]) as http:
        t0 = time.perf_counter()
        for _ in range(n):
            await http.get("/openapi.json")
        request_ms = (time.perf_counter() - t0) / n * 1000
    return {"prefect_acquire_ms_avg": round(acquire_ms, 2), "cheapest_request_ms_avg": round(request_ms, 2)}


def run_flow(sheet: Path, report_dir: str) -> dict:
    from flows.payouts import PayoutRunParams, payout_spreadsheet

    t0 = time.perf_counter()
    s = asyncio.run(
        payout_spreadsheet(
            PayoutRunParams(
                source=str(sheet),
                label="bench",
                report_dir=report_dir,
                poll_deadline_s=600,
                check_names=False,
                rate_limit_per_s=1000,
            )
        )
    )
    wall = time.perf_counter() - t0
    return {"wall_s": round(wall, 2), "summary": s}


def with_sandbox(latency_ms: int, fn, *args):
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env_file = Path(tmp) / "env"
        proc = start_sandbox(port, env_file, latency_ms=latency_ms)
        try:
            os.environ.update(read_env_file(env_file))
            return fn(*args)
        finally:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument(
        "--baseline-rows",
        type=int,
        default=None,
        help="rows for the naive baseline (default: same as --rows)",
    )
    ap.add_argument("--latency-ms", type=int, default=0, help="emulated network latency per API request")
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("PREFECT_HOME", str(ROOT / ".prefect-home"))
    n = args.rows
    rows = payroll_rows(n, prefix="BE")
    with tempfile.TemporaryDirectory() as tmp:
        sheet = write_sheet(Path(tmp) / "bench.xlsx", rows)
        # Start a Prefect server before timing (its ~20 s start is not the flow's cost); it dies with us.
        from deployments.prefect_server import prefect_api

        with prefect_api(say=lambda line: print(line, file=sys.stderr)):
            flow = with_sandbox(args.latency_ms, run_flow, sheet, str(Path(tmp) / "reports"))
            cost = with_sandbox(args.latency_ms, lambda: asyncio.run(limiter_cost()))
        s = flow["summary"]
        nb = args.baseline_rows or n
        base = with_sandbox(args.latency_ms, lambda: asyncio.run(naive(rows[:nb])))
    base_wall_for_n = base["wall_s"] * n / nb
    batches = math.ceil(n / 100)
    calls: Counter[str] = Counter(s["api_calls"])
    out = {
        "rows": n,
        "latency_ms": args.latency_ms,
        "flow": {
            "wall_s": flow["wall_s"],
            "phase_durations_s": s["phase_durations_s"],
            "payouts_by_status": s["payouts_by_status"],
            "api_calls": dict(calls),
            "submit_calls": calls["POST /v1/payout-batches"],
            "batches": s["batches"],
            "poll_calls_per_round": s["poll_calls_per_round"],
            "rate_limit": s.get("rate_limit"),
            "prefect_limit_cost": cost,
            "peak_rss_mb": round(peak_rss_mb(), 1),
        },
        "baseline": {**base, "rows": nb, "wall_s_scaled_to_rows": round(base_wall_for_n, 2)},
        "speedup": round(base_wall_for_n / flow["wall_s"], 1),
        "targets": {
            "submit_calls_eq_batches": calls["POST /v1/payout-batches"] == batches,
            "poll_calls_per_round_le_pages_plus_stragglers": all(
                c <= batches + 10 for c in s["poll_calls_per_round"]
            ),
            "speedup_ge_10x": base_wall_for_n / flow["wall_s"] >= 10,
            "peak_rss_le_400mb": peak_rss_mb() <= 400,
        },
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
