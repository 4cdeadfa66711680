"""Scale-out on loopback: Prefect server on PostgreSQL, two process workers, three payout runs at once, and
the emulator never sees more than the `payments-api` global rate limit allows. The workers run as a worker
host does (issue 43): the payops wheel installed in a fresh venv, a working folder of their own, no checkout
on their path, the service's credential a block they name.

The emulator runs in this process behind a tiny ASGI middleware that records when each /v1 request arrives.
With a limit of L slots decaying at D per second, any window of T seconds holds at most L + D*T requests.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from payops.deployments.scaleout.loopback import LoopbackCluster
from payops.sandbox import SandboxConfig, SandboxServer, create_app

from tests.deployments.console_harness import payroll_rows, write_sheet
from tests.deployments.scaleout_support import (
    BLOCK,
    assert_workers_run_the_wheel,
    final_state,
    save_credentials,
    server_payouts,
    start_payout,
    state_types,
)
from tests.flows.approval_support import prepared_home
from tests.wheel_venv import wheel_venv

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

LIMIT, DECAY = 3, 3.0
ARRIVAL_LAG_S = 0.5
"""How much later than its slot's acquisition a request may reach the emulator on a loaded host."""
RUNS, ROWS = 3, 300


class ArrivalLog:
    """ASGI middleware: monotonic arrival times of API requests (paths under /v1/)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.times: list[float] = []
        self.lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            with self.lock:
                self.times.append(time.monotonic())
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[SandboxServer, ArrivalLog]]:
    app = create_app(SandboxConfig(delivery_delay_s=1.0))
    log = ArrivalLog(app)
    server = SandboxServer(app=app)
    server.app = log  # uvicorn serves the wrapped app; `server.sandbox` reads state from the inner one
    with server:
        yield server, log


def only_source_and_label(cluster: LoopbackCluster, tmp_path: Path) -> None:
    """`prefect deployment run --param params=...` with only the sheet and a label (issue 43): Prefect
    replaces the deployment's whole `params`, its credentials_block with it; the run reads the workers'
    block and pays."""
    sheet = write_sheet(tmp_path / "by-hand.xlsx", payroll_rows(3, prefix="HAND"))
    report_dir = tmp_path / "reports-by-hand"
    given = {"source": str(sheet), "label": "by-hand", "check_names": False, "report_dir": str(report_dir)}
    out = cluster.cli(
        "deployment", "run", "payout-spreadsheet/payout-spreadsheet", "--param", f"params={json.dumps(given)}"
    )
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", out)
    assert run_id, out
    state = asyncio.run(final_state(cluster, run_id.group(1)))
    assert state == "COMPLETED", f"the run ended {state}; logs in {cluster.log_dir}"
    summary = json.loads((report_dir / "by-hand.json").read_text())
    assert summary["payouts_by_status"] == {"delivered": 3}


def sending_run(cluster: LoopbackCluster, server: SandboxServer, tmp: Path, label: str) -> tuple[str, int]:
    """A `DIES_ROWS` payout run under ``label`` (reports in ``reports-<label>``), once its first payouts are
    at the service: its id, and the service's payout count before it."""
    sheet = write_sheet(tmp / f"{label}.xlsx", payroll_rows(DIES_ROWS, prefix=label[:3].upper()))
    given = {"source": str(sheet), "label": label, "check_names": False, "poll_deadline_s": 300,
             "max_concurrent_batches": 1, "report_dir": str(tmp / f"reports-{label}")}  # fmt: skip
    before = server_payouts(server)
    run_id = asyncio.run(start_payout(cluster, given))
    deadline = time.monotonic() + 120
    while server_payouts(server) == before:
        assert time.monotonic() < deadline, "the run never sent"
        time.sleep(0.05)
    return run_id, before


def a_crashed_run_retried_by_hand(cluster: LoopbackCluster, server: SandboxServer, tmp_path: Path) -> None:
    """SIGKILL only a payout run's flow process once it has sent: its worker reports the run Crashed; then
    `prefect flow-run retry` (issue 43), as an operator holding Prefect's login types it, completes it on a
    worker, and every row is paid once. Before the recovery automations are applied (they would restart it
    themselves)."""
    import psutil

    run_id, before = sending_run(cluster, server, tmp_path, "retried-by-hand")
    workers = [p for name, p in cluster.sup.children if name.startswith("worker-") and p.poll() is None]
    flow_process = next(
        child
        for w in workers
        for child in psutil.Process(w.pid).children(recursive=True)
        if child.environ().get("PREFECT__FLOW_RUN_ID") == run_id
    )
    for proc in [*flow_process.children(recursive=True), flow_process]:
        proc.kill()
    sent_then = server_payouts(server) - before
    assert sent_then < DIES_ROWS, "the run had finished sending before the kill"
    assert asyncio.run(final_state(cluster, run_id, timeout=60)) == "CRASHED"
    # Prefect's process worker reports a killed run Crashed twice, seconds apart (its runner, then the
    # worker itself); a retry between the two is undone by the second (seen in CI: the retried run never
    # started). The second report adds no state when the run is still Crashed, so this waits out the 30 s
    # an operator is told to give the worker (docs/operations.md), or less if a second Crashed shows.
    deadline = time.monotonic() + 30
    while asyncio.run(state_types(cluster, run_id)).count("CRASHED") < 2 and time.monotonic() < deadline:
        time.sleep(0.5)

    cluster.cli("flow-run", "retry", run_id)
    ends = frozenset({"COMPLETED", "FAILED", "CANCELLED"})
    retried_at = time.monotonic()
    state = asyncio.run(final_state(cluster, run_id, timeout=300, ends=ends))
    history = asyncio.run(state_types(cluster, run_id))
    took = time.monotonic() - retried_at
    assert state == "COMPLETED", f"retried run {state} after {took:.0f} s: {history}, {cluster.log_dir}"
    assert server_payouts(server) - before == DIES_ROWS  # each row paid once: the retry replayed
    summary = json.loads((tmp_path / "reports-retried-by-hand" / "retried-by-hand.json").read_text())
    assert summary["payouts_by_status"] == {"delivered": DIES_ROWS}
    took = round(time.monotonic() - retried_at)
    print(json.dumps({"retried_after_payouts": sent_then, "completed_after_retry_s": took}))


DIES_ROWS = 1000
"""Ten batches sent one at a time under the 3-a-second limit: seconds of sending to kill the run inside (two
batches went out together under a loaded CI before the kill)."""
HEARTBEAT_WINDOW_S = 100  # deployments/automations/recovery/payout-run-gone.yaml


def a_worker_dies_mid_send(cluster: LoopbackCluster, server: SandboxServer, tmp_path: Path) -> None:
    """SIGKILL the worker running a payout run, and the run's process, once its first payouts are created
    (issue 43): nobody re-runs it, yet within the heartbeat window plus a minute the run was found gone
    (Crashed), started again on the other worker, and completed; every payout was created once."""
    import psutil
    from payops.deployments.alerts import apply_recovery
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: cluster.api_url}):
        assert len(asyncio.run(apply_recovery())) == 4
    run_id, before = sending_run(cluster, server, tmp_path, "dies-mid-send")
    workers = [p for name, p in cluster.sup.children if name.startswith("worker-") and p.poll() is None]
    busy = [w for w in workers if psutil.Process(w.pid).children(recursive=True)]
    assert len(busy) == 1, "one worker runs the payout run"
    doomed = [psutil.Process(busy[0].pid), *psutil.Process(busy[0].pid).children(recursive=True)]
    for proc in doomed:
        proc.kill()
    killed_at, sent_then = time.monotonic(), server_payouts(server) - before
    assert sent_then < DIES_ROWS, "the run had finished sending before the kill"

    # Crashed is final to Prefect, but not the run's end: the recovery automation starts it again
    ends = frozenset({"COMPLETED", "FAILED", "CANCELLED"})
    state = asyncio.run(final_state(cluster, run_id, timeout=HEARTBEAT_WINDOW_S + 60 + 90, ends=ends))
    took = time.monotonic() - killed_at
    assert state == "COMPLETED", f"the run ended {state}; logs in {cluster.log_dir}"
    assert took <= HEARTBEAT_WINDOW_S + 60 + 30, f"finished {took:.0f} s after the kill"  # detection ticks
    assert server_payouts(server) - before == DIES_ROWS  # each row paid once: the restart replayed
    history = asyncio.run(state_types(cluster, run_id))
    assert "CRASHED" in history and history[-1] == "COMPLETED", history
    print(json.dumps({"killed_after_payouts": sent_then, "completed_after_kill_s": round(took)}))


def most_in_window(times: list[float], window_s: float) -> int:
    times = sorted(times)
    return max((bisect.bisect_right(times, t + window_s) - i for i, t in enumerate(times)), default=0)


async def run_three(cluster: LoopbackCluster, sheets: list[Path], tmp: Path) -> list[Any]:
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(api=cluster.api_url) as client:
        deployment = await client.read_deployment_by_name("payout-spreadsheet/payout-spreadsheet")
        runs = [
            await client.create_flow_run_from_deployment(
                deployment.id,
                parameters={
                    "params": {
                        "source": str(sheet),
                        "report_dir": str(tmp / f"reports-{i}"),
                        "check_names": False,
                        "poll_deadline_s": 150,
                        "credentials_block": "",  # the worker's environment
                    }
                },
            )
            for i, sheet in enumerate(sheets)
        ]
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline:
            runs = [await client.read_flow_run(r.id) for r in runs]
            if all(r.state and r.state.is_final() for r in runs):
                break
            await asyncio.sleep(2)
    return runs


def test_three_runs_on_two_workers_share_one_request_rate(
    emulator: tuple[SandboxServer, ArrivalLog], tmp_path: Path
) -> None:
    server, log = emulator
    sheets = [
        write_sheet(tmp_path / f"sheet-{i}.xlsx", payroll_rows(ROWS, prefix=f"SO{i}")) for i in range(RUNS)
    ]
    # The service's credential is a block the workers name (the Prefect variable prefect.yaml reads, into
    # each flow process's PAYOPS_CREDENTIALS_BLOCK): the workers hold no client id or secret of their own.
    secret = ("PAYOPS_CLIENT_ID", "PAYOPS_CLIENT_SECRET")
    workers_env = {k: v for k, v in server.env.items() if k not in secret}
    python = wheel_venv(tmp_path / "wheel")
    with LoopbackCluster(
        workers=2,
        worker_python=python,
        limit=LIMIT,
        decay_per_s=DECAY,
        worker_env={
            **workers_env,
            **prepared_home(tmp_path / "payops-home", operator=None),
            "PREFECT_LOGGING_LEVEL": "INFO",  # the runs' steps in the workers' logs, for a failure's reader
        },
        log_dir=tmp_path / "cluster",
        variables={"payops_credentials_block": BLOCK},
    ) as cluster:
        save_credentials(cluster, server)
        assert_workers_run_the_wheel(cluster, python)
        start = len(log.times)
        runs = asyncio.run(run_three(cluster, sheets, tmp_path))
        states = [r.state.type.value if r.state else None for r in runs]
        assert states == ["COMPLETED"] * RUNS, f"runs ended {states}; logs in {cluster.log_dir}"
        times = log.times[start:]
        only_source_and_label(cluster, tmp_path)
        a_crashed_run_retried_by_hand(cluster, server, tmp_path)
        a_worker_dies_mid_send(cluster, server, tmp_path)

    summaries = [
        json.loads(next((tmp_path / f"reports-{i}").glob("*.json")).read_text()) for i in range(RUNS)
    ]
    for s in summaries:
        assert s["outcome"] == "completed" and s["payouts_by_status"] == {"delivered": ROWS}
        assert s["rate_limit"]["source"] == "prefect"  # the global limit, not a per-process bucket
    # The limit was binding: batch submissions queued for slots (an idle acquire takes a few tens of ms).
    assert max(s["rate_limit"]["wait_ms_avg"] for s in summaries) > 150, [s["rate_limit"] for s in summaries]
    # The three runs really overlapped (they ran at the same time on the two workers).
    starts = sorted(r.start_time for r in runs)
    ends = sorted(r.end_time for r in runs)
    assert starts[-1] < ends[0]

    assert len(times) > 4 * LIMIT, "too few requests to exercise the limit"
    for window in (1.0, 2.0, 5.0):
        # The limit holds where slots are acquired (the Prefect server); the emulator logs arrivals, which
        # lag each acquisition by the time the flow process takes to send (+1: one may land just after the
        # window). On a loaded 2-core host (two workers, three runs, a Prefect server, the emulator) that
        # lag varied by a few hundred ms: a CI run saw 8 arrivals within 1 s against 7 without this
        # allowance, while the sustained rate (below) stayed under the limit.
        allowed = LIMIT + DECAY * (window + ARRIVAL_LAG_S) + 1
        seen = most_in_window(times, window)
        assert seen <= allowed, f"{seen} requests within {window}s; the limit allows {allowed}"
    sustained = (len(times) - LIMIT) / (max(times) - min(times))
    print(
        json.dumps(
            {
                "requests": len(times),
                "span_s": round(max(times) - min(times), 1),
                "max_in_1s": most_in_window(times, 1.0),
                "sustained_per_s": round(sustained, 2),
            }
        )
    )
    assert sustained <= DECAY * 1.1, f"sustained {sustained:.2f} req/s over a {DECAY}/s limit"
