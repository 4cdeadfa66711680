"""What the scale-out tests share: the workers' credential block, the emulator's payout count, payout runs
started and followed through the cluster's Prefect API."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
from payops.deployments.scaleout.loopback import LoopbackCluster
from payops.sandbox import SandboxServer

from tests.wheel_venv import ROOT, run

BLOCK = "payments-scaleout"


def assert_workers_run_the_wheel(cluster: LoopbackCluster, python: Path) -> None:
    """Every worker is the wheel venv's Python, in a folder outside the checkout, and that Python imports
    payops from the wheel (site-packages), not from the checkout."""
    import psutil

    workers = [p for name, p in cluster.sup.children if name.startswith("worker-")]
    assert len(workers) == 2
    for proc in workers:
        info = psutil.Process(proc.pid)
        assert info.cmdline()[0] == str(python)
        assert not Path(info.cwd()).is_relative_to(ROOT)
    where = run([str(python), "-c", "import payops; print(payops.__file__)"], cwd=python.parents[2]).stdout
    assert "site-packages" in where and not Path(where.strip()).is_relative_to(ROOT), where


def save_credentials(cluster: LoopbackCluster, server: SandboxServer) -> None:
    """The emulator's credential as the block the workers name, saved on the cluster's Prefect server."""
    from payops.tasks.runtime.credentials import PaymentsCredentials
    from prefect.settings import PREFECT_API_URL, temporary_settings

    env = server.env
    block = PaymentsCredentials(
        base_url=env["PAYOPS_BASE_URL"],
        auth_url=env["PAYOPS_AUTH_URL"],
        client_id=env["PAYOPS_CLIENT_ID"],
        client_secret=env["PAYOPS_CLIENT_SECRET"],
    )
    with temporary_settings({PREFECT_API_URL: cluster.api_url}):
        block.save(BLOCK, overwrite=True)


def server_payouts(server: SandboxServer) -> int:
    stats = httpx.get(f"{server.base_url}/_sandbox/stats", timeout=10).json()
    return sum(env["payouts"] for biz in stats["businesses"].values() for env in biz.values())


async def start_payout(cluster: LoopbackCluster, params: dict[str, Any]) -> str:
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(api=cluster.api_url) as client:
        deployment = await client.read_deployment_by_name("payout-spreadsheet/payout-spreadsheet")
        run = await client.create_flow_run_from_deployment(deployment.id, parameters={"params": params})
    return str(run.id)


async def state_types(cluster: LoopbackCluster, run_id: str) -> list[str]:
    """The run's states, oldest first (their types)."""
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(api=cluster.api_url) as client:
        states = await client.read_flow_run_states(run_id)
    return [s.type.value for s in sorted(states, key=lambda s: s.timestamp)]


async def final_state(
    cluster: LoopbackCluster, run_id: str, timeout: float = 120, ends: frozenset[str] | None = None
) -> str | None:
    """The run's final state type, or (``ends``) the first of those it reaches; at the timeout, the state
    it is in then (final or not)."""
    from prefect.client.orchestration import PrefectClient

    seen: str | None = None
    async with PrefectClient(api=cluster.api_url) as client:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = await client.read_flow_run(run_id)
            seen = run.state.type.value if run.state else None
            if run.state and run.state.is_final() and (ends is None or seen in ends):
                return seen
            await asyncio.sleep(1)
    return seen


async def runs_of(cluster: LoopbackCluster, flow_name: str) -> list[Any]:
    """Every run of ``flow_name`` on the cluster's Prefect, oldest expected start first."""
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    async with PrefectClient(api=cluster.api_url) as client:
        runs = await client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])))
    return sorted(runs, key=lambda r: r.expected_start_time or r.created)


async def flow_runs_of(cluster: LoopbackCluster, flow_name: str) -> list[str]:
    """Each run of ``flow_name`` as a line for a failure's reader: name, state, expected start, start, end."""

    def at(when: Any) -> str:
        return when.strftime("%H:%M:%S") if when else "-"

    return [
        f"{r.name} {r.state.name if r.state else None} expected {at(r.expected_start_time)} "
        f"started {at(r.start_time)} ended {at(r.end_time)}"
        for r in await runs_of(cluster, flow_name)
    ]
