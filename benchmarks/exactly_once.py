"""`payouts_e2e --kill-mid-run`: the payout flow SIGKILLed mid-send, run again with the same label, and the
emulator's state read back through the API: every row paid exactly once.

Mid-send is seen from the service's side. While the flow process runs, ``GET /v1/limits`` is read every
`WATCH_EVERY_S`: its monthly outbound ``used`` is the sum of the payouts the service has accepted (added at
acceptance, removed on failure), so ``used / the sheet's total`` is the share of the sheet the service holds.
That read costs the service O(1) at any size, where counting payouts means paging the whole list
(10,000 pages at a million rows, on every watch); and it counts what the service accepted, not what the
client heard back (the flow's own progress lags by the batches in flight). Amounts are random, so the share
of the money tracks the share of the rows; the exact count at the kill is read afterwards, from the list.

A SIGKILLed process cleans nothing up: the flow process's descendants are listed just before the kill and
must be gone shortly after it (they die with their parent, `preexec_own_group_dying_with_parent`); any left
are reported and killed, by pid. The emulator and the Prefect server are the benchmark's, stopped by it.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks.flow_process import run_flow_process, start_flow_process
from benchmarks.payroll import SheetFile

MID_SEND = (0.2, 0.8)
"""Mid-send: the service holds 20% to 80% of the sheet's rows when the flow process dies."""
KILL_AT = MID_SEND[0]
"""Kill as soon as the service holds this share of the sheet's money: the batches in flight land after it
(up to `max_concurrent_batches` × 100 rows, 4 × 100 by default: 20% of a 2,000-row sheet, 0.04% of a
million rows)."""
WATCH_EVERY_S = 0.02
ORPHAN_WAIT_S = 5.0
PAGE = 100


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, read from /proc (children first found, then theirs)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone while listed
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def outliving(pids: list[int], wait_s: float = ORPHAN_WAIT_S) -> list[dict[str, Any]]:
    """The processes of `pids` still running after `wait_s`, each then killed (SIGKILL, by pid)."""
    deadline = time.monotonic() + wait_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [{"pid": p, "command": _command(p)} for p in pids if _alive(p)]
    for p in left:
        os.kill(p["pid"], signal.SIGKILL)
    return left


@dataclass
class Ledger:
    """The sheet's rows as the service holds them: how many payouts carry each row's reference."""

    rows: int
    cycle: str
    counts: bytearray = field(init=False)
    foreign: list[str] = field(default_factory=list)
    amount: Decimal = Decimal(0)
    by_status: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.counts = bytearray(self.rows)
        self._pattern = re.compile(rf"{re.escape(self.cycle)}-(\d+)")

    def add(self, reference: str, amount: Decimal | None, status: str) -> None:
        m = self._pattern.fullmatch(reference)
        index = int(m.group(1)) if m else -1
        if not 0 <= index < self.rows:
            self.foreign.append(reference)
            return
        self.counts[index] = min(255, self.counts[index] + 1)
        self.amount += amount or Decimal(0)
        self.by_status[status] += 1

    def figures(self) -> dict[str, Any]:
        paid = self.rows - self.counts.count(0)
        return {
            "payouts": sum(self.counts) + len(self.foreign),
            "rows_paid": paid,
            "rows_unpaid": self.rows - paid,
            "rows_paid_more_than_once": self.rows - self.counts.count(0) - self.counts.count(1),
            "foreign_references": self.foreign[:10],
            "amount_total": f"{self.amount:.2f}",
            "by_status": dict(sorted(self.by_status.items())),
        }


async def read_ledger(rows: int, cycle: str) -> Ledger:
    """Every payout the service holds, read through ``GET /v1/transactions?kind=payout``, by row."""
    from payops.connectors.payments import PaymentsClient, PaymentsSettings

    ledger = Ledger(rows, cycle)
    async with PaymentsClient(PaymentsSettings()) as client:
        async for page in client.transactions.pages(kind="payout", limit=PAGE):
            for t in page:
                ledger.add(t.reference, t.amount, t.status)
    return ledger


async def _accepted_amount(client: Any, currency: str) -> Decimal:
    for limits in await client.limits.get():
        if limits.currency == currency:
            return Decimal(str(limits.monthly.out.used))
    return Decimal(0)


async def kill_mid_send(
    proc: subprocess.Popen[bytes], amount_total: Decimal, kill_at: float, currency: str = "GHS"
) -> dict[str, Any]:
    """Watch the service's accepted amount; SIGKILL `proc` once it reaches `kill_at` of `amount_total`."""
    from payops.connectors.payments import PaymentsClient, PaymentsSettings

    t0 = time.perf_counter()
    watches = 0
    async with PaymentsClient(PaymentsSettings()) as client:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the flow process ended (exit {proc.returncode}) before the kill")
            share = await _accepted_amount(client, currency) / amount_total
            watches += 1
            if share >= kill_at:
                below = descendants(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)
                break
            await asyncio.sleep(WATCH_EVERY_S)
    killed_at = time.perf_counter() - t0
    proc.wait()
    return {
        "after_s": round(killed_at, 2),
        "watches": watches,
        "accepted_amount_share_seen": round(float(share), 4),
        "descendants_at_kill": [{"pid": p, "command": _command(p)} for p in below],
        "outliving_the_kill": outliving(below),
    }


def exactly_once(
    sheet: SheetFile,
    cycle: str,
    label: str,
    report_dir: str,
    poll_deadline_s: float,
    kill_at: float = KILL_AT,
) -> dict[str, Any]:
    """The kill, the re-run and the check, against the emulator and Prefect server in place."""
    proc = start_flow_process(sheet.path, label, report_dir, poll_deadline_s)
    try:
        kill = asyncio.run(kill_mid_send(proc, sheet.amount_total, kill_at))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    at_kill = asyncio.run(read_ledger(sheet.rows, cycle)).figures()
    paid_share = at_kill["rows_paid"] / sheet.rows
    kill.update(
        {
            "rows_paid": at_kill["rows_paid"],
            "rows_paid_share": round(paid_share, 4),
            "mid_send": MID_SEND[0] <= paid_share <= MID_SEND[1],
        }
    )
    rerun = run_flow_process(sheet.path, label, report_dir, poll_deadline_s)
    after = asyncio.run(read_ledger(sheet.rows, cycle)).figures()
    held = (
        after["rows_paid"] == sheet.rows == rerun["rows_valid"]
        and after["payouts"] == sheet.rows
        and after["rows_paid_more_than_once"] == 0
        and not after["foreign_references"]
        and Decimal(after["amount_total"]) == sheet.amount_total
    )
    return {
        "kill": kill,
        "rerun": rerun,
        "emulator_after_rerun": after,
        "exactly_once": held,
        "replayed_payouts": rerun["replayed_payouts"],
        "targets": {
            "exactly_once": held,
            "killed_mid_send": kill["mid_send"],
            "rerun_replayed_what_was_paid": rerun["replayed_payouts"] == at_kill["rows_paid"],
            "nothing_outlived_the_kill": not kill["outliving_the_kill"],
        },
    }
