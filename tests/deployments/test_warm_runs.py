"""Warm runs (deployments/warm_runs.py): a payout run handed to a process forked from a fork server that has
the flow imported claims it (Pending, granted once), pays it, and ends with it; a run someone else took is
left alone; a cancellation asked through Prefect ends the process and the run is Cancelled, nothing sent."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet

from tests.deployments.browser_harness import payouts_at
from tests.deployments.console_harness import good_sheet

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


async def _create(params: PayoutRunParams) -> Any:
    from datetime import UTC, datetime, timedelta

    from payops.deployments.console.runs import WARM_HEAD_START_S
    from prefect.client.orchestration import get_client
    from prefect.states import Scheduled

    # as the launcher creates a run it hands to a warm process: scheduled its head start ahead, so the
    # runner does not take it first
    ahead = datetime.now(UTC) + timedelta(seconds=WARM_HEAD_START_S)
    async with get_client() as client:
        return await client.create_flow_run(
            payout_spreadsheet,
            name=params.label,
            parameters={"params": params.model_dump(mode="json")},
            state=Scheduled(scheduled_time=ahead),
        )


async def _states(run_id: Any) -> list[Any]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return await client.read_flow_run_states(run_id)


def _state(run_id: Any) -> Any:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(run_id).state


def _until(what: str, check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.5)
    return found


def test_a_warm_process_claims_pays_and_ends_with_its_run(
    prefect_harness: None, emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payops.deployments.warm_runs import WarmRuns
    from payops.store import PayopsSettings, upgrade_database
    from payops.store.approvals import state_policy
    from payops.tasks.approval.approval_keys import ensure_key_pair
    from prefect.client.schemas.objects import StateType
    from prefect.settings import PREFECT_API_URL
    from prefect.states import Cancelling, Pending

    home = tmp_path / "home"
    for key, value in {
        **emulator.env,
        "PREFECT_API_URL": PREFECT_API_URL.value(),
        "PAYOPS_HOME": str(home),
    }.items():
        monkeypatch.setenv(key, value)
    ensure_key_pair(home)
    state_policy(upgrade_database(PayopsSettings.from_env()), "none")
    warm = WarmRuns()
    warm.warm_up()  # the fork server starts with this environment and imports the flow once
    reports = str(tmp_path / "reports")

    before = payouts_at(emulator)
    paid = asyncio.run(
        _create(
            PayoutRunParams(
                source=str(good_sheet(tmp_path / "w.xlsx", 4, "WRM")), label="warm-1", report_dir=reports
            )
        )
    )
    process = warm.take(paid.id)
    final = _until("the warm run ends", lambda: (s := _state(paid.id)) and s.is_final() and s)
    assert final.name == "Completed with failures" and payouts_at(emulator) == before + 4
    process.join(30)
    assert process.exitcode == 0
    states = asyncio.run(_states(paid.id))
    pending = [s for s in states if s.type == StateType.PENDING]
    assert [s.message for s in pending] == ["taken by a warm process"]
    # at once: not held by Prefect until the head start the run was scheduled with
    running = next(s for s in states if s.type == StateType.RUNNING)
    assert running.timestamp < states[0].state_details.scheduled_time

    taken = asyncio.run(
        _create(PayoutRunParams(source=str(tmp_path / "w.xlsx"), label="warm-2", report_dir=reports))
    )
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(taken.id, Pending(message="a runner took it"))
    left = warm.take(taken.id)
    left.join(60)
    assert left.exitcode == 0 and _state(taken.id).message == "a runner took it"  # left alone
    # The race: the run read Scheduled, a runner's Pending lands, then ours. Prefect refuses ours but
    # answers with the run's state, Pending (the runner's): only the answer's status says who holds it.
    from payops.deployments.warm_runs import granted

    raced = asyncio.run(
        _create(PayoutRunParams(source=str(tmp_path / "w.xlsx"), label="warm-race", report_dir=reports))
    )
    with get_client(sync_client=True) as client:
        assert granted(client.set_flow_run_state(raced.id, Pending(message="a runner took it")))
        late = client.set_flow_run_state(raced.id, Pending(message="taken by a warm process"))
    assert late.state.type == StateType.PENDING and not granted(late)

    waiting = asyncio.run(
        _create(
            PayoutRunParams(
                source=str(tmp_path / "w.xlsx"), label="warm-3", report_dir=reports, require_approval=True
            )
        )
    )
    process = warm.take(waiting.id)
    _until("the run waits for approval", lambda: _state(waiting.id).type == StateType.PAUSED)
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(waiting.id, Cancelling(), force=True)
    process.join(30)
    assert process.exitcode is not None, "a cancelled run's process goes"
    assert _state(waiting.id).type == StateType.CANCELLED and payouts_at(emulator) == before + 4
