"""Starting payout runs (by a deployment, or locally in a thread) and reading their progress from Prefect.

Both launchers create a real Prefect flow run and return its id; the run pages read everything from the
Prefect API, so they look the same in both modes.

* ``DeploymentLauncher``: ``run_deployment(name="payout-spreadsheet/<deployment>", timeout=0)``; a worker or
  ``payops serve`` executes it.
* ``LocalLauncher`` (local single-process mode, when no deployment is configured): the console creates the
  flow run and executes it in a background thread of its own process. Runs stop when the console stops.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from payops.deployments.run_history import FLOW_NAME, payout_flow_runs
from payops.flows.outcomes import state_tone
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet

if TYPE_CHECKING:
    from payops.deployments.warm_runs import WarmRuns

log = logging.getLogger("payops.console.runs")

CONSOLE_TAG = "payops-console"


class RunLauncher(Protocol):
    mode: str

    async def start(self, params: PayoutRunParams, run_name: str) -> UUID: ...

    async def start_flow(self, flow: Any, parameters: dict[str, Any], run_name: str) -> UUID: ...


WARM_HEAD_START_S = 20.0
"""How far ahead a run handed to a warm process is scheduled: more than the runner's prefetch (10 s, Prefect's
default), so the warm process has it first."""


class DeploymentLauncher:
    """Runs the payout deployment (and the other flows' deployments, named as their flows are, as
    prefect.yaml names them); a worker (or ``payops serve``) picks the run up."""

    mode = "deployment"

    def __init__(self, deployment: str, warm: WarmRuns | None = None) -> None:
        self.name = deployment if "/" in deployment else f"{FLOW_NAME}/{deployment}"
        self.warm = warm

    async def start(self, params: PayoutRunParams, run_name: str) -> UUID:
        """A run of the payout deployment; with ``warm``, handed at once to a process that has the flow
        imported (`deployments.warm_runs`), else left to the deployment's runner or worker."""
        # A warm process takes the run at once; the runner would look for it within its query interval (2 s)
        # and take it first on a busy host. Scheduled `WARM_HEAD_START_S` ahead, the runner sees it only
        # after that less its prefetch: should the warm process fail, the runner still runs it then.
        ahead = WARM_HEAD_START_S if self.warm is not None else 0.0
        run_id = await self._run(self.name, {"params": params.model_dump(mode="json")}, run_name, ahead)
        if self.warm is not None:
            await asyncio.to_thread(self.warm.take, run_id)
        return run_id

    async def start_flow(self, flow: Any, parameters: dict[str, Any], run_name: str) -> UUID:
        return await self._run(f"{flow.name}/{flow.name}", parameters, run_name)

    @staticmethod
    async def _run(deployment: str, parameters: dict[str, Any], run_name: str, ahead_s: float = 0.0) -> UUID:
        from prefect.deployments import run_deployment

        flow_run = await run_deployment(
            name=deployment,
            parameters=parameters,
            scheduled_time=datetime.now(UTC) + timedelta(seconds=ahead_s) if ahead_s else None,
            timeout=0,
            flow_run_name=run_name,
            tags=[CONSOLE_TAG],
            as_subflow=False,
        )
        return flow_run.id


class LocalLauncher:
    """Local single-process mode: the flow runs in a daemon thread of the console process."""

    mode = "local"

    def __init__(self) -> None:
        self.threads: dict[UUID, threading.Thread] = {}

    async def start(self, params: PayoutRunParams, run_name: str) -> UUID:
        return await self.start_flow(payout_spreadsheet, {"params": params}, run_name)

    async def start_flow(self, flow: Any, parameters: dict[str, Any], run_name: str) -> UUID:
        from prefect.client.orchestration import get_client
        from pydantic import BaseModel

        stored = {
            k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in parameters.items()
        }
        async with get_client() as client:
            flow_run = await client.create_flow_run(
                flow, name=run_name, parameters=stored, tags=[CONSOLE_TAG]
            )
        thread = threading.Thread(
            target=self._execute, args=(flow, flow_run, parameters), name=f"flow-{run_name}", daemon=True
        )
        self.threads[flow_run.id] = thread
        thread.start()
        return flow_run.id

    @staticmethod
    def _execute(flow: Any, flow_run: Any, parameters: dict[str, Any]) -> None:
        from prefect.flow_engine import run_flow_async

        try:
            asyncio.run(run_flow_async(flow, flow_run=flow_run, parameters=parameters, return_type="state"))
        except Exception as exc:  # noqa: BLE001 - the Prefect state records the failure; log it for the operator
            log.error("local flow run %s ended with %s", flow_run.id, type(exc).__name__)

    def join(self, timeout: float | None = None) -> None:
        for thread in list(self.threads.values()):
            thread.join(timeout)


@dataclass
class RunView:
    """What the run pages show about one payout flow run."""

    id: str
    name: str
    state_type: str
    state_name: str
    message: str | None
    start: str | None
    final: bool
    paused: bool
    upload_id: str | None
    source_name: str | None
    progress: float | None = None

    @property
    def tone(self) -> str:
        """The state badge's colour (`flows.outcomes.state_tone`): failures are never green."""
        return state_tone(self.state_type, self.state_name)


def _view(flow_run: Any, upload_id_of: Any) -> RunView:
    state = flow_run.state
    params = (flow_run.parameters or {}).get("params") or {}
    report_dir = params.get("report_dir") if isinstance(params, dict) else None
    source = params.get("source") if isinstance(params, dict) else None
    message = (state.message or None) if state else None
    when = flow_run.start_time or flow_run.expected_start_time or flow_run.created
    return RunView(
        id=str(flow_run.id),
        name=flow_run.name,
        state_type=state.type.value if state else "UNKNOWN",
        state_name=state.name if state else "Unknown",
        message=message[:300] if message else None,
        start=when.strftime("%Y-%m-%d %H:%M:%S UTC") if when else None,
        final=bool(state and state.is_final()),
        paused=bool(state and state.is_paused()),
        upload_id=upload_id_of(report_dir),
        source_name=str(source).rsplit("/", 1)[-1] if source else None,
    )


async def read_run(flow_run_id: UUID, upload_id_of: Any) -> RunView | None:
    """The run, or None when Prefect has no payout run with this id."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterType
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            flow_run = await client.read_flow_run(flow_run_id)
        except ObjectNotFound:
            return None
        flow = await client.read_flow(flow_run.flow_id)
        if flow.name != FLOW_NAME:
            return None
        view = _view(flow_run, upload_id_of)
        artifacts = await client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
                type=ArtifactFilterType(any_=["progress"]),
            )
        )
    progress = [a.data for a in artifacts if isinstance(a.data, int | float)]
    if progress:
        view.progress = float(max(progress))
    return view


async def recent_runs(upload_id_of: Any, limit: int = 25) -> list[RunView]:
    """The latest payout flow runs, newest first."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        runs = await payout_flow_runs(client, limit)
    return [_view(r, upload_id_of) for r in runs]


async def run_ids_named(names: list[str]) -> dict[str, str]:
    """``{name: flow run id}``: the newest payout run of each of ``names`` that has one."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    if not names:
        return {}
    async with get_client() as client:
        found = await client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=[FLOW_NAME])),
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=list(names))),
            sort=FlowRunSort.EXPECTED_START_TIME_DESC,
        )
    ids: dict[str, str] = {}
    for flow_run in found:
        ids.setdefault(flow_run.name, str(flow_run.id))
    return ids


async def run_names(ids: list[str]) -> dict[str, str]:
    """``{flow run id: name}`` of the runs ``ids`` Prefect has: the one name the console shows a run by."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    wanted = sorted({UUID(i) for i in ids})
    if not wanted:
        return {}
    async with get_client() as client:
        found = await client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=wanted)))
    return {str(r.id): r.name for r in found}
