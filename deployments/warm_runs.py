"""Payout runs the payops server starts, executed at once in a process that has Prefect and the flows
imported already: a run's fixed cost without a cold Python start.

A deployment run waits for the runner's next look (every 2 s) and then for a new Python process to import
Prefect and payops (about 2.5 s here, measured) before its first step. The server starts the runs people ask
for (the console, the API, the CLI through it), so it hands each one, the moment it has created it, to a
process forked from a **fork server** (`multiprocessing`'s ``forkserver``: one clean, single-threaded
process started once, with Prefect and the payout flow imported) instead. Why not hand-rolled: the
standard library's fork server forks from a process that never ran a thread, which is what makes a fork
safe, and reaps its children.

The run stays a run of the payout deployment, created through Prefect as before: the forked process
*claims* it by proposing Pending, which Prefect's orchestration grants once, so if a runner or worker took
it first the process leaves it alone, and a run no fork picks up is run by the deployment's runner as
before. Each run gets its own process, which ends with the run; a cancellation (Prefect's UI or API) is
noticed within :data:`CANCEL_CHECK_S` and ends it, as the runner ends its own processes. The forked process
only verifies approvals: it never loads the signing key.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
from typing import Any
from uuid import UUID

log = logging.getLogger("payops.console.warm_runs")

PRELOAD = ["payops.deployments.warm_runs", "payops.flows.payouts", "prefect.flow_engine"]
"""What the fork server imports once, so a forked run does not."""
CANCEL_CHECK_S = 2.0
SERVER_ONLY = ("PAYOPS_WEBHOOK_SECRETS", "PAYOPS_CONSOLE_SESSION_KEY")
"""The console's own secrets, which a flow run needs not hold."""


class WarmRuns:
    """Forks a process per payout run from one fork server of this console process."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(PRELOAD)
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Start the fork server and its imports now (a few seconds, once), not at the first run."""
        from multiprocessing import forkserver

        with self._lock:
            forkserver.ensure_running()

    def take(self, flow_run_id: UUID) -> multiprocessing.process.BaseProcess:
        """Run ``flow_run_id`` in a forked process (it claims the run first: see the module docstring)."""
        with self._lock:
            multiprocessing.active_children()  # reap the runs that ended
            process = self._context.Process(
                target=execute, args=(str(flow_run_id),), name=f"payops-run-{flow_run_id}", daemon=False
            )
            process.start()
        log.info("payout run %s handed to process %s", flow_run_id, process.pid)
        return process


def execute(flow_run_id: str) -> None:
    """The forked process: claim the run, run it with the payout flow imported already, end with it."""
    for name in SERVER_ONLY:
        os.environ.pop(name, None)
    run_id = UUID(flow_run_id)
    flow_run = asyncio.run(_claim(run_id))
    if flow_run is None:
        return
    from payops.flows.payouts import payout_spreadsheet
    from prefect.engine import handle_engine_signals
    from prefect.flow_engine import run_flow

    threading.Thread(target=_end_when_cancelled, args=(run_id,), name="cancel-watch", daemon=True).start()
    with handle_engine_signals(run_id):
        outcome = run_flow(payout_spreadsheet, flow_run=flow_run, return_type="state")
        if asyncio.iscoroutine(outcome):
            asyncio.run(outcome)


async def _claim(run_id: UUID) -> Any:
    """The flow run once this process holds it (Pending granted), else None: a runner took it first."""
    from datetime import UTC, datetime

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateDetails, StateType
    from prefect.states import Pending

    async with get_client() as client:
        flow_run = await client.read_flow_run(run_id)
        if flow_run.state is None or flow_run.state.type != StateType.SCHEDULED:
            return None
        # Pending carries the time the run may start (Prefect copies the Scheduled state's, the launcher's
        # head start, unless one is proposed): now, or Prefect would hold its Running until the head start.
        now = StateDetails(scheduled_time=datetime.now(UTC))
        answer = await client.set_flow_run_state(
            run_id, Pending(message="taken by a warm process", state_details=now)
        )
        if not granted(answer):
            return None
        return await client.read_flow_run(run_id)


def granted(answer: Any) -> bool:
    """Whether Prefect accepted a proposed state (an ``OrchestrationResult``). Its ``state`` is no answer:
    a refused Pending (a runner took the run between our read and our proposal) comes back with the run's
    current state, which is Pending too, the runner's."""
    from prefect.client.schemas.responses import SetStateStatus

    return answer.status == SetStateStatus.ACCEPT


def _end_when_cancelled(run_id: UUID) -> None:
    """A cancellation asked through Prefect ends this process (the run is then marked Cancelled), as
    Prefect's runner ends the processes of its runs; what was sent stays sent, and a re-run replays."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.states import Cancelled

    while True:
        time.sleep(CANCEL_CHECK_S)
        try:
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(run_id).state
                if state is not None and state.is_final():
                    return
                if state is not None and state.type == StateType.CANCELLING:
                    client.set_flow_run_state(run_id, Cancelled(message="cancelled"), force=True)
                    os._exit(1)
        except Exception as exc:  # noqa: BLE001 - a failed look is retried at the next one; the run goes on
            log.warning("could not read run %s's state (%s)", run_id, type(exc).__name__)
