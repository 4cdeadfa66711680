"""Recent payout runs as Prefect knows them: state, parameters and each run's record artifact.

The `payout-spreadsheet` flow ends every run by publishing a one-row table artifact (``LABEL-record``, see
`tasks.reports.artifacts.run_record`): outcome, totals by status, approval, report files. `payops runs` reads
these.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import UUID

from payops.tasks.reports.artifacts import RECORD_DESCRIPTION, artifact_key

FLOW_NAME = "payout-spreadsheet"


@dataclass
class RunRecord:
    """One payout run: what `payops runs` lists and shows."""

    id: str
    name: str
    state: str
    start: str | None
    label: str | None
    source: str | None
    report_dir: str | None = None
    dry_run: bool = False
    outcome: str | None = None
    rows_total: int | None = None
    amount_total: str | None = None
    fee_total: str | None = None
    moved: dict[str, Any] = field(default_factory=dict)
    payouts_by_status: dict[str, int] = field(default_factory=dict)
    refused_items: int = 0
    awaiting_review: int = 0
    needs_attention: int = 0
    started_by: str | None = None
    approved: bool | None = None
    approved_by: str | None = None
    report_files: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _table_row(data: Any) -> dict[str, Any]:
    rows = json.loads(data) if isinstance(data, str) else data
    return rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}


def _json_field(value: Any) -> dict[str, Any]:
    if isinstance(value, str) and value:
        loaded = json.loads(value)
        return loaded if isinstance(loaded, dict) else {}
    return value if isinstance(value, dict) else {}


def _record(flow_run: Any, facts: dict[str, Any]) -> RunRecord:
    params = (flow_run.parameters or {}).get("params") or {}
    params = params if isinstance(params, dict) else {}
    state = flow_run.state
    when = flow_run.start_time or flow_run.expected_start_time
    creator = flow_run.created_by.display_value if flow_run.created_by else None
    return RunRecord(
        id=str(flow_run.id),
        name=flow_run.name,
        state=state.name if state else "Unknown",
        start=when.strftime("%Y-%m-%d %H:%M:%S UTC") if when else None,
        label=facts.get("label") or params.get("label"),
        source=params.get("source"),
        report_dir=params.get("report_dir"),
        dry_run=bool(params.get("dry_run")),
        outcome=facts.get("outcome"),
        rows_total=facts.get("rows_total"),
        amount_total=facts.get("amount_total"),
        fee_total=facts.get("fee_total"),
        moved=_json_field(facts.get("moved")),
        payouts_by_status=_json_field(facts.get("payouts_by_status")),
        refused_items=int(facts.get("refused_items") or 0),
        awaiting_review=int(facts.get("awaiting_review") or 0),
        needs_attention=int(facts.get("needs_attention") or 0),
        started_by=facts.get("started_by") or params.get("started_by") or creator,
        approved=facts.get("approved"),
        approved_by=facts.get("approved_by"),
        report_files=_json_field(facts.get("report_files")),
    )


async def _records_of(client: Any, flow_runs: list[Any]) -> list[RunRecord]:
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterType,
    )

    facts: dict[str, dict[str, Any]] = {}
    if flow_runs:
        artifacts = await client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[r.id for r in flow_runs]),
                type=ArtifactFilterType(any_=["table"]),
            )
        )
        for a in artifacts:
            if a.description == RECORD_DESCRIPTION and a.flow_run_id is not None:
                facts[str(a.flow_run_id)] = _table_row(a.data)
    return [_record(r, facts.get(str(r.id), {})) for r in flow_runs]


async def payout_flow_runs(client: Any, limit: int) -> list[Any]:
    """The latest `payout-spreadsheet` flow runs (Prefect objects), newest first."""
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    return await client.read_flow_runs(
        flow_filter=FlowFilter(name=FlowFilterName(any_=[FLOW_NAME])),
        sort=FlowRunSort.EXPECTED_START_TIME_DESC,
        limit=limit,
    )


async def recent_payout_runs(limit: int = 20) -> list[RunRecord]:
    """The latest payout runs, newest first."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return await _records_of(client, await payout_flow_runs(client, limit))


async def find_payout_runs(name_or_id: str, scan: int = 200) -> list[RunRecord]:
    """Payout runs by flow run id, or every run (newest first) whose name, label or label tag is
    ``name_or_id``: the one name a run has everywhere (the label operators chose, else the sheet's name;
    a run still going or paused has no record yet, so its name, parameters and tags count too)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            run_id = UUID(name_or_id)
        except ValueError:
            matching = [r for r in await payout_flow_runs(client, scan) if _named(r, name_or_id)]
            labelled = await _runs_with_record_label(client, name_or_id, {str(r.id) for r in matching})
            runs = sorted([*matching, *labelled], key=_started, reverse=True)
            return await _records_of(client, runs)
        try:
            flow_run = await client.read_flow_run(run_id)
        except ObjectNotFound:
            return []
        flow = await client.read_flow(flow_run.flow_id)
        return await _records_of(client, [flow_run]) if flow.name == FLOW_NAME else []


async def find_payout_run(name_or_id: str) -> RunRecord | None:
    """The newest payout run `find_payout_runs` finds (None when there is none)."""
    found = await find_payout_runs(name_or_id)
    return found[0] if found else None


async def payout_label(name_or_id: str) -> str:
    """The label of the payout run shown as ``name_or_id`` (its name, label or flow run id: what the console
    and `payops runs` show), which its reconciliation is recorded under; the text itself when Prefect knows
    no such run (a run recorded for reconciliation only)."""
    record = await find_payout_run(name_or_id)
    return record.label if record is not None and record.label else name_or_id


def _named(flow_run: Any, name: str) -> bool:
    params = (flow_run.parameters or {}).get("params") or {}
    label = params.get("label") if isinstance(params, dict) else None
    return name in (flow_run.name, label) or name in (flow_run.tags or [])


def _started(flow_run: Any) -> Any:
    return flow_run.start_time or flow_run.expected_start_time or flow_run.created


async def _runs_with_record_label(client: Any, label: str, known: set[str]) -> list[Any]:
    """Finished runs beyond the scanned ones whose record artifact carries ``label``."""
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterId,
    )

    records = await client.read_artifacts(
        artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[artifact_key(label, "record")]))
    )
    ids = {a.flow_run_id for a in records if a.flow_run_id is not None and str(a.flow_run_id) not in known}
    if not ids:
        return []
    return await client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=list(ids))))
