"""Benchmark: memory of reconciling one payout run of N payouts (issue 34: memory that does not grow with the
run), this checkout's `reconcile_run` against the one of an earlier revision, in the same run; print JSON.

The service is a fake client answering the transaction list with pages of 100 generated payouts, validated
from JSON into the connector's models as the real client does (amounts with cents, fees, one in 1,000 with
a different amount, one in 2,000 mismatched by the platform; 1 in 500 approved payouts missing from the
listing, a third of those found by a GET (an earlier attempt), the rest unknown to the service; 50 payouts
carrying the run's reference pattern that payops did not send). The payops database (SQLite) is recorded
once per N, in parts of 50,000, by `ReconciliationStore.record_intent`. Each variant reconciles in a fresh
process: its peak RSS growth over the process's RSS before the check (``ru_maxrss`` after minus RSS before)
and, with ``--tracemalloc``, the Python heap's peak.

* ``chunked``: this checkout's `tasks.ledger.run_reconciliation.reconcile_run` (match file, chunks);
* ``whole``: the same function of ``--baseline-rev`` (default b2963d5: every record and approved payout
  held, one pandas frame), loaded from git.

**Target** (issue 34): the chunked check's peak RSS growth on the large run within `TARGET_GROWTH_MB` of
its growth on the small one. Figures: docs/performance.md.

Usage: python benchmarks/reconcile_run_memory.py [--payouts 100000 400000] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABEL = "bench-rec"
T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
PART = 50_000
TARGET_GROWTH_MB = 50
"""Issue 34: the large run's peak RSS growth within this much of the small run's."""


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reference(i: int) -> str:
    return f"{LABEL}-r{i + 2}"


def _amount(i: int) -> str:
    return f"{10 + i % 23}.{i % 100:02d}"


def record(db: Path, n: int) -> None:
    from payops.store import migrate, open_engine
    from payops.store.reconciliation import IntendedPayout, ReconciliationStore

    engine = open_engine(f"sqlite:///{db}")
    migrate(engine)
    store = ReconciliationStore(engine)
    for start in range(0, n, PART):
        part = [
            IntendedPayout(_reference(i), i + 2, _amount(i), "GHS", "0.50", "0.60")
            for i in range(start, min(n, start + PART))
        ]
        store.record_intent(LABEL, T0, part, first=start == 0)
    store.mark_ended(LABEL, T0 + timedelta(hours=2))
    engine.dispose()


def _wire(i: int, reference: str, amount: str) -> dict:
    at = (T0 + timedelta(milliseconds=10 * i)).isoformat()
    return {
        "id": f"txn_{i:09d}",
        "kind": "payout",
        "direction": "out",
        "reference": reference,
        "status": "delivered",
        "amount": amount,
        "currency": "GHS",
        "provider": "mtn",
        "fee": "0.50",
        "feeBearer": "sender",
        "payerAmount": str(Decimal(amount) + Decimal("0.50")),
        "recipientAmount": amount,
        "createdAt": at,
        "completedAt": at,
        "channel": "mobile_money",
        "reconciliation": {"status": "mismatched" if i % 2000 == 1 else "matched", "checkedAt": at},
    }


class _Payouts:
    def __init__(self, calls: Counter[str]) -> None:
        self.calls = calls

    async def get(self, reference: str):
        from payops.connectors.payments import NotFoundError
        from payops.connectors.payments.models import Payout

        self.calls["GET /v1/payouts/{reference}"] += 1
        i = int(reference.rsplit("-r", 1)[1]) - 2
        if i % 1500 != 0:
            raise NotFoundError("no such payout", status=404, code="not_found")
        wire = _wire(i, reference, _amount(i))
        for key in ("id", "kind", "direction"):
            wire.pop(key)
        return Payout.model_validate(wire)


class _Transactions:
    """The run's window, paged at 100, each page validated from JSON into `TransactionPage`."""

    def __init__(self, n: int, calls: Counter[str]) -> None:
        self.n, self.calls = n, calls

    def _listed(self):
        for i in range(self.n):
            if i % 500 == 0:  # missing from the listing (a GET finds a third of them)
                continue
            amount = "1.00" if i % 1000 == 7 else _amount(i)
            yield _wire(i, _reference(i), amount)
        for k in range(50):  # the run's reference pattern, not sent by payops
            yield _wire(self.n + k, _reference(self.n + 10_000 + k), "5.00")

    async def pages(self, **_filters):
        from payops.connectors.payments.models import TransactionPage

        page: list[dict] = []
        for item in self._listed():
            page.append(item)
            if len(page) == 100:
                self.calls["GET /v1/transactions"] += 1
                yield TransactionPage.model_validate_json(json.dumps({"items": page})).items
                page = []
                await asyncio.sleep(0)
        if page:
            self.calls["GET /v1/transactions"] += 1
            yield TransactionPage.model_validate_json(json.dumps({"items": page})).items

    async def iterate(self, **filters):
        async for page in self.pages(**filters):
            for tx in page:
                yield tx


class FakeClient:
    def __init__(self, n: int) -> None:
        self.api_calls: Counter[str] = Counter()
        self.transactions = _Transactions(n, self.api_calls)
        self.payouts = _Payouts(self.api_calls)


def _module(variant: str, rev: str):
    if variant == "chunked":
        from payops.tasks.ledger import run_reconciliation

        return run_reconciliation
    source = subprocess.run(
        ["git", "show", f"{rev}:tasks/ledger/run_reconciliation.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "run_reconciliation_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("run_reconciliation_baseline", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def reconcile(db: Path, n: int, variant: str, rev: str, trace: bool) -> dict:
    import tracemalloc

    from payops.store import open_engine
    from payops.store.reconciliation import ReconciliationStore

    rr = _module(variant, rev)
    store = ReconciliationStore(open_engine(f"sqlite:///{db}"))
    store.run(LABEL)  # the engine's connection pool and the ORM warmed up before measuring
    client = FakeClient(n)
    rss0 = _rss_mb()
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    check = asyncio.run(
        rr.reconcile_run(client, store, LABEL, "benchmark", now=T0 + timedelta(hours=3))  # type: ignore[arg-type]
    )
    wall = time.perf_counter() - t0
    out = {
        "variant": variant,
        "payouts": n,
        "wall_s": round(wall, 1),
        "rss_before_mb": round(rss0, 1),
        "peak_rss_growth_mb": round(_peak_rss_mb() - rss0, 1),
        "summary": {k: check.summary[k] for k in ("status", "rows", "matched", "open", "by_kind")},
        "api_calls": dict(client.api_calls),
    }
    if trace:
        out["tracemalloc_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payouts", type=int, nargs="+", default=[100_000, 400_000])
    parser.add_argument("--variants", nargs="+", default=["chunked", "whole"])
    parser.add_argument("--baseline-rev", default="b2963d5")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("DB", "N", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        db, n, variant = args.child
        print(json.dumps(reconcile(Path(db), int(n), variant, args.baseline_rev, args.tracemalloc)))
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.payouts:
            db = Path(tmp) / f"payops-{n}.sqlite3"
            record(db, n)
            for variant in args.variants:
                cmd = [sys.executable, __file__, "--child", str(db), str(n), variant]
                cmd += ["--baseline-rev", args.baseline_rev] + (["--tracemalloc"] if args.tracemalloc else [])
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{variant} on {n} payouts failed:\n{done.stderr[-3000:]}")
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(json.dumps(results[-1]), file=sys.stderr)
    growth = {(r["variant"], r["payouts"]): r["peak_rss_growth_mb"] for r in results}
    small, large = min(args.payouts), max(args.payouts)
    more = {v: round(growth[(v, large)] - growth[(v, small)], 1) for v in args.variants}
    out = {
        "benchmark": "reconcile_run_memory",
        "small": small,
        "large": large,
        "baseline_rev": args.baseline_rev,
        "results": results,
        "peak_rss_growth_large_minus_small_mb": more,
    }
    if "chunked" in more:
        out["targets"] = {"reconcile_growth_le_50_mb": more["chunked"] <= TARGET_GROWTH_MB}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
