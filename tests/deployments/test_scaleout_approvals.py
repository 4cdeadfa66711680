"""Approval waits on Prefect workers (issue 43): a payout run waiting for approval is suspended, not paused,
so no worker process waits for a person, and a worker that dies meanwhile strands nothing.

The cluster is the scale-out recipe's (PostgreSQL, a process work pool, two workers running the payops wheel
from a fresh venv, prefect.yaml's job variables: PAYOPS_APPROVAL_WAIT=suspend), every deployment of
prefect.yaml deployed (`prefect deploy --all`: the approval-deadlines sweep on its one-minute schedule, the
catch-up and the wallet watch among them), and the recovery automations applied. The test plays the payops
server: it holds the approval key's private half and approves as the console does (approving.decide).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest
from payops.deployments.scaleout.loopback import LoopbackCluster
from payops.sandbox import SandboxConfig, SandboxServer
from payops.store.settings import PayopsSettings
from sqlalchemy import Engine

from tests.deployments.console_harness import payroll_rows, write_sheet
from tests.deployments.scaleout_support import (
    BLOCK,
    final_state,
    flow_runs_of,
    runs_of,
    save_credentials,
    server_payouts,
    start_payout,
    state_types,
)
from tests.flows.approval_support import decide_on, prepared_home
from tests.wheel_venv import wheel_venv

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

WAITING, ROWS = 5, 3
APPROVER = "abena"
QUIET_S = 100  # a run without a heartbeat this long is taken for gone (recovery/payout-run-gone.yaml)
EXPIRES_S, REMIND_S = 120, 100
"""The reminder is due 20 s after the run suspends: the sweep (every 60 s) resumes it by 80 s, which leaves a
resumed run 40 s to start on a loaded worker and still find its deadline ahead (a run that starts after its
deadline ends Not approved without reminding: with 75 s, a sweep at 105 s and a slow start missed it)."""
ENDS = frozenset({"COMPLETED", "FAILED", "CANCELLED"})  # Crashed is restarted by the recovery automation


@contextmanager
def payops_engine(settings: PayopsSettings) -> Iterator[Engine]:
    from payops.store import upgrade_database

    engine = upgrade_database(settings)
    try:
        yield engine
    finally:
        engine.dispose()


async def approve(cluster: LoopbackCluster, settings: PayopsSettings, run_id: str) -> str:
    """One approver's approval, signed and stored as the payops server does, which resumes the run; the
    findings the page shows ("no payee names were checked") acknowledged."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with payops_engine(settings) as engine, temporary_settings({PREFECT_API_URL: cluster.api_url}):
        return await decide_on(engine, settings, run_id, APPROVER, comment="payroll checked")


async def wait_suspended(cluster: LoopbackCluster, run_ids: list[str], timeout: float = 240) -> None:
    """Until every run is Suspended (each state read through the cluster's API)."""
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(api=cluster.api_url) as client:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            runs = [await client.read_flow_run(r) for r in run_ids]
            if all(r.state and r.state.name == "Suspended" for r in runs):
                return
            await asyncio.sleep(1)
    states = [r.state.name if r.state else None for r in runs]
    raise AssertionError(f"not all suspended for approval: {states}; logs in {cluster.log_dir}")


async def state_name(cluster: LoopbackCluster, run_id: str) -> str | None:
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(api=cluster.api_url) as client:
        run = await client.read_flow_run(run_id)
    return run.state.name if run.state else None


def flow_processes(cluster: LoopbackCluster, run_ids: list[str]) -> list[str]:
    """The processes the live workers hold for these flow runs (a run's process is a worker's child, its
    run's id in its environment), as their runs' ids."""
    workers = [p for name, p in cluster.sup.children if name.startswith("worker-") and p.poll() is None]
    held = []
    for worker in workers:
        for child in psutil.Process(worker.pid).children(recursive=True):
            try:
                run_id = child.environ().get("PREFECT__FLOW_RUN_ID")
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # it ended meanwhile
            if run_id in run_ids:
                held.append(run_id)
    return held


def processes_once_settled(cluster: LoopbackCluster, run_ids: list[str], within_s: float = 30) -> list[str]:
    """`flow_processes` once a suspended run's process has had the time to end (it exits just after its
    run is Suspended), or what is still held after ``within_s``."""
    deadline = time.monotonic() + within_s
    while (held := flow_processes(cluster, run_ids)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return held


async def between_sweeps(cluster: LoopbackCluster, within_s: float = 120) -> None:
    """Return when no approval-deadlines sweep is being submitted or run, nor due within 20 s.

    Known gap (found by this test, not fixed yet): a worker killed while it submits a sweep leaves that run
    in Prefect's Submitting state, whose deployment concurrency slot (limit 1, CANCEL_NEW) is held until
    Prefect's lease ends (300 s): every sweep in between is cancelled, so reminders and deadlines come late.
    This test is about suspended payout runs outliving a dead worker, so it kills the worker between sweeps.
    """
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        soon = datetime.now(UTC) + timedelta(seconds=20)
        busy = [
            r
            for r in await runs_of(cluster, "approval-deadlines")
            if r.state
            and not r.state.is_final()
            and (not r.state.is_scheduled() or (r.expected_start_time and r.expected_start_time < soon))
        ]
        if not busy:
            return
        await asyncio.sleep(1)
    raise AssertionError(f"a sweep was always being submitted or run for {within_s} s")


def test_runs_waiting_for_approval_hold_no_worker_and_outlive_a_dead_one(tmp_path: Path) -> None:
    from payops.deployments.alerts import apply_recovery
    from payops.store.approval_requests import ApprovalRequests
    from payops.tasks.approval.approval_keys import ensure_key_pair
    from prefect.settings import PREFECT_API_URL, temporary_settings

    home = tmp_path / "payops-home"
    home_env = prepared_home(home, policy="0:1", operator=None)  # every run needs one approval
    ensure_key_pair(home)  # workers read its public half from the home; this test holds the private one
    settings = PayopsSettings(home=home, database_url=f"sqlite:///{home / 'payops.sqlite3'}")
    python = wheel_venv(tmp_path / "wheel")
    with SandboxServer(SandboxConfig(delivery_delay_s=0.5)) as server:
        secret = ("PAYOPS_CLIENT_ID", "PAYOPS_CLIENT_SECRET")
        workers_env = {k: v for k, v in server.env.items() if k not in secret}
        with LoopbackCluster(
            workers=2,
            worker_python=python,
            limit=20,
            # the runs' and the sweep's steps in the workers' logs, for a failure's reader
            worker_env={**workers_env, **home_env, "PREFECT_LOGGING_LEVEL": "INFO"},
            deployments=None,  # `prefect deploy --all`: schedules and triggers too, as on a payroll day
            log_dir=tmp_path / "cluster",
            variables={"payops_credentials_block": BLOCK},
        ) as cluster:
            save_credentials(cluster, server)
            with temporary_settings({PREFECT_API_URL: cluster.api_url}):
                assert len(asyncio.run(apply_recovery())) == 4

            def params(i: int, **more: object) -> dict[str, object]:
                sheet = write_sheet(tmp_path / f"wait-{i}.xlsx", payroll_rows(ROWS, prefix=f"AW{i}"))
                report = str(tmp_path / f"reports-{i}")
                return {
                    "source": str(sheet),
                    "label": f"wait-{i}",
                    "check_names": False,
                    "report_dir": report,
                } | more

            expiring = asyncio.run(
                start_payout(
                    cluster, params(WAITING, approval_timeout_s=EXPIRES_S, approval_reminder_s=REMIND_S)
                )
            )
            waiting = [asyncio.run(start_payout(cluster, params(i))) for i in range(WAITING)]
            asyncio.run(wait_suspended(cluster, [*waiting, expiring]))
            suspended_at = time.monotonic()

            # Six runs wait for approval: no worker holds a process for any of them.
            held = processes_once_settled(cluster, [*waiting, expiring])
            assert held == [], f"flow processes held while their runs wait for approval: {held}"

            # A worker dies while they wait (there is no flow process to kill with it)
            worker_1 = next(p for name, p in cluster.sup.children if name == "worker-1")
            asyncio.run(between_sweeps(cluster))
            worker_1.kill()
            worker_1.wait(10)

            # They stay suspended past the heartbeat window: a suspended run is not taken for gone
            time.sleep(max(0.0, suspended_at + QUIET_S + 5 - time.monotonic()))
            before = server_payouts(server)
            for run_id in waiting:
                said = asyncio.run(approve(cluster, settings, run_id))
                assert said == "Approved: the run continues and sends the payouts.", said
            ended = [asyncio.run(final_state(cluster, r, timeout=240, ends=ENDS)) for r in waiting]
            assert ended == ["COMPLETED"] * WAITING, f"runs ended {ended}; logs in {cluster.log_dir}"
            assert server_payouts(server) - before == WAITING * ROWS  # each approved row paid once
            for i, run_id in enumerate(waiting):
                summary = json.loads((tmp_path / f"reports-{i}" / f"wait-{i}.json").read_text())
                assert summary["payouts_by_status"] == {"delivered": ROWS}
                assert summary["approval"]["approvers"] == [APPROVER]
                history = asyncio.run(state_types(cluster, run_id))
                assert "PAUSED" in history and "CRASHED" not in history, history

            # Nobody approves the last: the approval-deadlines deployment resumes it for its reminder and
            # at its deadline; it reminds, then ends Not approved.
            left = EXPIRES_S - (time.monotonic() - suspended_at) + 60 + 90  # the sweep's minute, a start
            state = asyncio.run(final_state(cluster, expiring, timeout=max(left, 60), ends=ENDS))
            sweeps = "\n".join(asyncio.run(flow_runs_of(cluster, "approval-deadlines")))
            assert state == "CANCELLED", (
                f"the unapproved run ended {state}; logs in {cluster.log_dir}; the sweeps:\n{sweeps}"
            )
            assert asyncio.run(state_name(cluster, expiring)) == "Not approved"
            assert server_payouts(server) - before == WAITING * ROWS  # nothing sent for it
            history = asyncio.run(state_types(cluster, expiring))
            assert history.count("PAUSED") >= 2 and "CRASHED" not in history, history
            with payops_engine(settings) as engine:
                request = ApprovalRequests(engine).get(expiring)
            assert request is not None and request.state == "expired" and request.reminded_at is not None
            print(json.dumps({"flow_processes_while_waiting": len(held), "expired_run_states": history}))
