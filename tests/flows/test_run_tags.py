"""What Prefect's UI shows of a payout run that ended with failures (its badge stays green): the run's tags,
read back through Prefect's API, and the summary artifact's warning line. And a run's reconciliation asked
for through the server's API is labelled "api" in the history, as a day close is (issue 47)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from payops.flows.outcomes import run_summary
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.flows.reconcile import ReconcileRunParams, reconcile_run
from payops.flows.run_params import FAILURES_TAG, PAYOUT_TAG
from payops.sandbox import SandboxConfig, SandboxServer
from payops.tasks.reports.artifacts import artifact_key

from tests.flows.support import payroll_rows, write_sheet
from tests.flows.test_reconciliation import _use, checks


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(delivery_delay_s=0.3)) as s:
        yield s


@pytest.fixture
def env(server: SandboxServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SandboxServer:
    _use(monkeypatch, server.env, tmp_path)
    return server


async def _tags_and_summary_artifact(flow_run_id: Any, label: str) -> tuple[list[str], str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async with get_client() as client:
        flow_run = await client.read_flow_run(flow_run_id)
        (artifact,) = await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[artifact_key(label, "summary")]))
        )
    return list(flow_run.tags), str(artifact.data)


def _pay(tmp_path: Path, label: str, rows: list[list[str]]) -> Any:
    sheet = write_sheet(tmp_path / f"{label}.xlsx", rows)
    params = PayoutRunParams(
        source=str(sheet), label=label, report_dir=str(tmp_path / "reports"), poll_deadline_s=60
    )
    return asyncio.run(payout_spreadsheet(params, return_state=True))


@pytest.mark.e2e
def test_a_run_with_failures_is_tagged_and_its_artifact_leads_with_a_warning(
    prefect_harness, env: SandboxServer, tmp_path: Path
) -> None:
    failed = _pay(tmp_path, "tags-failed", payroll_rows(3, prefix="TF", specials={1: "0002"}))
    assert failed.name == "Completed with failures"
    tags, markdown = asyncio.run(_tags_and_summary_artifact(failed.state_details.flow_run_id, "tags-failed"))
    assert {PAYOUT_TAG, FAILURES_TAG, "tags-failed"} <= set(tags), tags
    first = markdown.splitlines()[0]
    assert first.startswith("> **Warning: completed with failures.** 1 payout failed"), first

    clean = _pay(tmp_path, "tags-clean", payroll_rows(2, prefix="TC"))
    assert clean.name == "Completed"
    tags, markdown = asyncio.run(_tags_and_summary_artifact(clean.state_details.flow_run_id, "tags-clean"))
    assert PAYOUT_TAG in tags and "tags-clean" in tags and FAILURES_TAG not in tags
    assert markdown.startswith("# Payout run `tags-clean`")

    # the run's reconciliation asked for through the API is the API's in the history
    params = ReconcileRunParams(label="tags-clean", trigger="api")
    again = run_summary(asyncio.run(reconcile_run(params, return_state=True)))
    assert again.label == "tags-clean"
    assert [c.trigger for c in checks("tags-clean")] == ["api", "run-end"]


def test_the_api_asks_for_a_runs_reconciliation_as_the_api_and_the_cli_as_the_cli(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """POST /reconcile with a run: the flow's trigger is the request's channel ("api" unless the CLI says
    "cli"), as for a day close."""
    from payops.deployments.console.api import reconciliation
    from payops.deployments.console.api.models import ReconcileRequest

    started: list[Any] = []

    async def start_flow(flow: Any, parameters: dict[str, Any], run_name: str) -> str:
        started.append(parameters["params"])
        return "00000000-0000-0000-0000-000000000001"

    async def payout_label(name: str) -> str:
        return name

    monkeypatch.setattr(reconciliation, "payout_label", payout_label)
    console = SimpleNamespace(
        settings=SimpleNamespace(credentials_block=""),
        launcher=SimpleNamespace(start_flow=start_flow),
        audit=lambda *a, **k: None,
    )
    account = SimpleNamespace(name="olu")
    for body in (ReconcileRequest(run="payroll-11"), ReconcileRequest(run="payroll-11", channel="cli")):
        asyncio.run(reconciliation.reconcile(None, console, account, body))  # type: ignore[arg-type]
    assert [(p.label, p.trigger) for p in started] == [("payroll-11", "api"), ("payroll-11", "cli")]
