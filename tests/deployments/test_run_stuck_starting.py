"""A worker that dies between taking a run (Pending, then Submitting) and its flow process starting leaves the
run there for good: no heartbeat ever comes, and its deployment's concurrency slot stays held (seen in the
scale-out test: every approval-deadlines sweep was cancelled for Prefect's 300 s lease). The shipped recovery
automations, on Prefect's own server, mark such a run Crashed after the stuck trigger's window: the slot is
freed, and a payout run is started again. A run whose flow process started is left alone.

The automations are the shipped ones with one change: the stuck trigger's window is `WITHIN_S` instead of the
shipped 120 s (checked here too), so the test waits 30 s rather than two minutes; what they match, expect and
do is the YAML's.

The states are set as the worker sets them (Pending, then Submitting) and the worker is not there: what a
worker killed at that instant leaves, every time (killing one inside that window is a race).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from payops.deployments.alerts import load_recovery_automations
from payops.deployments.serve import load_specs, resolve_templates, runner_deployments

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]

STUCK = "payops: run stuck starting"
RESTART = "payops: restart a crashed payout run"
SHIPPED_WITHIN_S = 120  # recovery/run-stuck-starting.yaml
WITHIN_S = 30  # the window this test gives it (the module's docstring)


async def _history(client: Any, run_id: Any) -> list[tuple[str, str]]:
    return [(s.type.value, s.name) for s in await client.read_flow_run_states(run_id)]


def test_a_run_a_dead_worker_took_is_crashed_its_slot_freed_a_payout_run_restarted(prefect_harness) -> None:
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled, Pending, Running

    specs = {s["name"]: s for s in load_specs()}
    wanted = [specs["payout-spreadsheet"], specs["approval-deadlines"]]
    resolved = asyncio.run(resolve_templates([{**s, "name": f"{s['name']}-stuck-check"} for s in wanted]))
    payouts, sweeps = runner_deployments(resolved)
    automations = [a for a in load_recovery_automations() if a.name in (STUCK, RESTART)]
    assert len(automations) == 2
    stuck_trigger = next(a for a in automations if a.name == STUCK).trigger
    assert stuck_trigger.within == timedelta(seconds=SHIPPED_WITHIN_S)
    stuck_trigger.within = timedelta(seconds=WITHIN_S)

    async def scenario() -> None:
        async with get_client() as client:
            created = [await client.create_automation(a) for a in automations]
            runs: list[Any] = []
            try:
                for deployment in (payouts, sweeps):
                    deployment.schedules = []  # only the runs made here
                payout_deployment, sweep_deployment = await payouts.apply(), await sweeps.apply()

                sheet = {"params": {"source": "/never/read.xlsx"}}  # no flow process ever reads it
                stuck = await client.create_flow_run_from_deployment(payout_deployment, parameters=sheet)
                await client.set_flow_run_state(stuck.id, Pending())  # a worker took it ...
                await client.set_flow_run_state(stuck.id, Pending(name="Submitting"))  # ... and died
                started = await client.create_flow_run_from_deployment(payout_deployment, parameters=sheet)
                await client.set_flow_run_state(started.id, Pending())
                await client.set_flow_run_state(started.id, Running())  # its flow process started
                sweep = await client.create_flow_run_from_deployment(sweep_deployment)
                await client.set_flow_run_state(sweep.id, Pending())  # holds the sweeps' one slot
                blocked = await client.create_flow_run_from_deployment(sweep_deployment)
                refused = (await client.set_flow_run_state(blocked.id, Pending())).state
                assert refused is not None and refused.is_cancelled(), refused  # CANCEL_NEW: the slot is held

                deadline = time.monotonic() + WITHIN_S + 120  # the trigger's window, then its evaluation
                while time.monotonic() < deadline:
                    payout_states = await _history(client, stuck.id)
                    sweep_states = await _history(client, sweep.id)
                    if ("SCHEDULED", "AwaitingRetry") in payout_states and sweep_states[-1][0] == "CRASHED":
                        break
                    await asyncio.sleep(3)
                assert ("CRASHED", "Crashed") in payout_states, payout_states
                assert payout_states[-1] == ("SCHEDULED", "AwaitingRetry"), payout_states  # restarted
                assert sweep_states[-1][0] == "CRASHED", sweep_states  # a sweep is not restarted

                next_sweep = await client.create_flow_run_from_deployment(sweep_deployment)
                taken = (await client.set_flow_run_state(next_sweep.id, Pending())).state
                assert taken is not None and taken.is_pending(), taken  # the slot was freed
                assert (await client.read_flow_run(started.id)).state.is_running()  # left alone
                runs += [stuck, started, sweep, blocked, next_sweep]
            finally:
                for automation_id in created:
                    await client.delete_automation(automation_id)
                for run in runs:  # nothing of this test left running on the session's server
                    await client.set_flow_run_state(run.id, Cancelled(), force=True)

    asyncio.run(scenario())
