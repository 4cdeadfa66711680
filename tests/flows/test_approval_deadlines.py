"""The approval-deadlines sweep resumes a suspended payout run when its reminder or deadline is due, and
nothing else: not a run whose due time is still ahead, not another flow's suspended run. (The whole round
trip, a run reminding and expiring on workers through the deployment's schedule, is
tests/deployments/test_scaleout_approvals.py.)"""

from __future__ import annotations

import asyncio

from payops.flows.approval_deadlines import NOT_A_DECISION, SWEEP_GRACE_S, resume_due


async def _suspended_runs() -> dict[str, str]:
    """Three suspended runs of deployments: a payout run due now (its pause ends within the grace), one due
    in ten minutes, and another flow's run due now. Their ids by name."""
    from prefect.client.orchestration import get_client
    from prefect.states import Running, Suspended

    out: dict[str, str] = {}
    async with get_client() as client:
        for flow_name, name, timeout in (
            ("payout-spreadsheet", "due", SWEEP_GRACE_S - 5),
            ("payout-spreadsheet", "later", SWEEP_GRACE_S + 600),
            ("wallet-watch", "other", 1),
        ):
            flow_id = await client.create_flow_from_name(flow_name)
            deployment = await client.create_deployment(flow_id=flow_id, name=f"sweep-{name}")
            run = await client.create_flow_run_from_deployment(deployment, name=f"sweep-{name}")
            await client.set_flow_run_state(run.id, Running(), force=True)
            key = f"{name}-approval-1-s0"
            state = Suspended(timeout_seconds=timeout, pause_key=key)
            result = await client.set_flow_run_state(run.id, state)
            assert result.state is not None and result.state.name == "Suspended", result
            out[name] = str(run.id)
    return out


def test_the_sweep_resumes_only_the_payout_runs_whose_due_time_came(prefect_harness: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled

    async def scenario() -> tuple[dict[str, str], list[str], dict[str, str | None]]:
        runs = await _suspended_runs()
        try:
            summary = await resume_due()
            async with get_client() as client:
                states = {n: (await client.read_flow_run(r)).state for n, r in runs.items()}
        finally:  # nothing of this test left waiting on the session's server (wallet-watch counts paused
            async with get_client() as client:  # and scheduled payout runs as upcoming: test_alerts_e2e)
                for run_id in runs.values():
                    await client.set_flow_run_state(run_id, Cancelled(), force=True)
        assert summary.suspended == 2  # the payout runs only
        return runs, summary.resumed, {n: s.name if s else None for n, s in states.items()}

    runs, resumed, states = asyncio.run(scenario())
    assert resumed == [runs["due"]]
    assert states == {"due": "Resuming", "later": "Suspended", "other": "Suspended"}
    assert NOT_A_DECISION == {"reject": False, "comment": ""}  # the form rejects nothing
