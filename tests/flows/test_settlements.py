"""Settlement flows end to end: emulator on a real uvicorn, flows under the session Prefect harness."""

from __future__ import annotations

import asyncio
import csv
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openpyxl import load_workbook
from payops.deployments.cli import app
from payops.flows.settlements import (
    SettlementRetryParams,
    SettleNowParams,
    retry_failed_settlements,
    settle_now,
)
from payops.sandbox import SandboxConfig, SandboxServer
from payops.tasks.settlements import POLICY_FIX
from payops.tasks.wire.references import resettlement_reference
from typer.testing import CliRunner

from tests.tasks.test_settlements import admin, resettle_requests, seed_runs

pytestmark = pytest.mark.e2e


def _serve(config: SandboxConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxServer]:
    with SandboxServer(config) as s:
        for k, v in s.env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("PAYOPS_BACKOFF_BASE_S", "0.05")
        monkeypatch.setenv("PAYOPS_BACKOFF_MAX_S", "1")
        monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "WARNING")  # restored after the CLI's --json changes it
        yield s


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxServer]:
    yield from _serve(SandboxConfig(settlement_delay_s=0.2), monkeypatch)


def retry(tmp_path: Path, **kw: Any) -> Any:
    """Run the retry flow; the final state (Completed with the summary, or Failed)."""
    params = SettlementRetryParams(report_dir=str(tmp_path), poll_deadline_s=30, **kw)
    return asyncio.run(retry_failed_settlements(params, return_state=True))


def summary_of(state: Any) -> dict[str, Any]:
    assert state.is_completed(), state.message
    return state.result()


def artifacts_of(state: Any) -> dict[str, Any]:
    """Key → data of the artifacts the flow run created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    async def read() -> dict[str, Any]:
        async with get_client() as client:
            flt = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id]))
            return {a.key: a.data for a in await client.read_artifacts(artifact_filter=flt)}

    return asyncio.run(read())


def rows_by_run(path: str) -> dict[str, dict[str, Any]]:
    ws = load_workbook(path)["runs"]
    rows = list(ws.iter_rows(values_only=True))
    return {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}


def test_failed_runs_are_retried_once_and_a_second_run_reports_them(
    prefect_harness, server, tmp_path
) -> None:
    ids = asyncio.run(seed_runs(server, ["failed_partial", "settled", "failed_all"]))
    first = retry(tmp_path / "one")
    s = summary_of(first)
    assert s["outcome"] == "completed" and s["runs_seen"] == 3 and s["failed_runs"] == 2
    assert s["retried"] == 2 and s["retried_before"] == 0 and s["skipped"] == 0
    assert set(s["retries"]) == {ids["failed_partial"], ids["failed_all"]}  # the settled run is never retried
    assert s["retry_outcomes"] == {"settled": 2} and s["retries_not_completed"] == []
    assert s["api_calls"]["POST /v1/settlements/{id}/resettlements"] == 2
    assert resettle_requests(server) == 2

    rows = rows_by_run(s["report_files"]["xlsx"])
    partial = rows[ids["failed_partial"]]
    assert partial["action"] == "retried" and partial["retry outcome"] == "settled"
    assert partial["retry reference"] == resettlement_reference(ids["failed_partial"])
    assert rows[ids["settled"]]["action"] == "not_eligible"
    with open(s["report_files"]["csv"], encoding="utf-8") as fh:
        assert len(list(csv.reader(fh))) == 4
    document = json.loads(Path(s["report_files"]["json"]).read_text())
    assert document["retried"] == 2 and len(document["runs"]) == 3
    artifacts = artifacts_of(first)
    assert "Retry outcomes" in artifacts["settlement-retry-summary"]
    assert "demo-test-secret" not in json.dumps(document) + json.dumps(artifacts, default=str)

    second = summary_of(retry(tmp_path / "two"))
    assert second["retried"] == 0 and second["retried_before"] == 2 and second["runs_seen"] == 5
    assert second["retries"] == s["retries"] and second["retry_outcomes"] == {"settled": 2}
    assert "POST /v1/settlements/{id}/resettlements" not in second["api_calls"]
    assert resettle_requests(server) == 2
    rows = rows_by_run(second["report_files"]["xlsx"])
    assert rows[ids["failed_all"]]["action"] == "retried_before"
    assert rows[s["retries"][ids["failed_all"]]]["action"] == "own_retry"


def test_a_retry_that_fails_again_is_reported_not_retried(prefect_harness, server, tmp_path) -> None:
    ids = asyncio.run(seed_runs(server, ["failed_all"], then="failed_all"))  # the policy still fails
    s = summary_of(retry(tmp_path, run_id=ids["failed_all"]))  # on demand, by id
    retry_id = s["retries"][ids["failed_all"]]
    assert s["retried"] == 1 and s["retry_outcomes"] == {"failed_all": 1}
    assert s["retries_failed_again"] == [retry_id]

    again = summary_of(retry(tmp_path))
    assert (
        again["retried"] == 0 and again["retried_before"] == 1 and again["retries_failed_again"] == [retry_id]
    )
    rows = rows_by_run(again["report_files"]["xlsx"])
    assert rows[retry_id]["action"] == "own_retry" and "not retried again" in rows[retry_id]["reason"]

    # Event-driven: the trigger passes the failed run's reference; our failed retry's event changes nothing.
    by_event = summary_of(retry(tmp_path, run_reference=resettlement_reference(ids["failed_all"])))
    assert by_event["runs_seen"] == 1 and by_event["retried"] == 0 and by_event["failed_runs"] == 0
    original = summary_of(retry(tmp_path, run_reference="seed-0-failed-all"))
    assert original["retried"] == 0 and original["retried_before"] == 1
    assert resettle_requests(server) == 1


def test_policy_alert_fails_and_the_cli_exits_non_zero_without_looping(
    prefect_harness, server, tmp_path
) -> None:
    asyncio.run(seed_runs(server, ["failed_partial", "failed_all"]))
    admin(server, "PATCH", "", {"providers": ["mtn", "telecel", "gcb"]})  # the policy's calbank is gone

    result = CliRunner().invoke(app, ["settlements", "retry", "--json", "--report-dir", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert POLICY_FIX in result.stderr and "Traceback" not in result.output + result.stderr
    printed = json.loads(result.stdout)
    assert printed["outcome"] == "policy_alert" and printed["alert"]["code"] == "policy_missing_provider"
    assert printed["not_attempted"] == 1 and printed["retried"] == 0
    assert resettle_requests(server) == 1

    state = retry(tmp_path)
    assert state.is_failed() and POLICY_FIX in state.message
    assert "policy_missing_provider" in artifacts_of(state)["settlement-policy-alert"]
    assert resettle_requests(server) == 2  # one request per run of the flow, never a loop


def test_faults_and_429s_change_nothing_in_the_outcome(
    prefect_harness, monkeypatch, tmp_path, caplog
) -> None:
    config = SandboxConfig(
        settlement_delay_s=0.2, fault_rate=0.1, fault_seed=11, rate_limit_per_s=15, rate_burst=2
    )
    caplog.set_level(logging.INFO, logger="payops.connectors.payments")
    for server in _serve(config, monkeypatch):
        ids = asyncio.run(seed_runs(server, ["failed_partial", "settled", "failed_all"]))
        s = summary_of(retry(tmp_path / "one"))
        assert s["retried"] == 2 and s["retry_outcomes"] == {"settled": 2} and s["skipped"] == 0
        assert set(s["retries"]) == {ids["failed_partial"], ids["failed_all"]}
        second = summary_of(retry(tmp_path / "two"))
        assert second["retried"] == 0 and second["retried_before"] == 2 and second["retries"] == s["retries"]
        assert len(server.state.envs[("demo", "test")].settlement_runs) == 5  # 3 seeded + exactly 2 retries
        requests = server.state.requests
        assert sum(v for k, v in requests.items() if k.startswith("fault")) > 0
    retried = [r.getMessage() for r in caplog.records if "; retry " in r.getMessage()]
    assert any("429" in m for m in retried) and any(" 50" in m for m in retried)


def test_settle_now_polls_to_completed_and_reports(prefect_harness, server, tmp_path) -> None:
    asyncio.run(seed_runs(server, [], then="settled"))  # wallet 10M, minimum balance 9M: 1M to settle
    result = CliRunner().invoke(
        app,
        ["settlements", "settle-now", "--json", "--reference", "sn-test-1", "--report-dir", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    s = json.loads(result.stdout)
    assert s["outcome"] == "completed" and s["settlement_outcome"] == "settled" and s["total"] == "1000000.00"
    assert s["api_calls"]["POST /v1/settlements"] == 1 and Path(s["report_files"]["xlsx"]).exists()

    asyncio.run(seed_runs(server, [], then="failed_partial"))
    admin(server, "POST", "/wallet/fund", {"amount": "1000000.00"})
    params = SettleNowParams(report_dir=str(tmp_path), poll_deadline_s=30)
    state = asyncio.run(settle_now(params, return_state=True))
    failed = summary_of(state)
    assert failed["outcome"] == "completed" and failed["settlement_outcome"] == "failed_partial"
    assert failed["reference"].startswith("payops-sn-") and failed["total"] == "500000.00"
    assert rows_by_run(failed["report_files"]["xlsx"])[failed["run_id"]]["action"] == "settle_now"
    assert "settle-now-summary" in artifacts_of(state)

    admin(server, "PATCH", "", {"providers": ["mtn"]})
    alert = asyncio.run(settle_now(params, return_state=True))
    assert alert.is_failed() and POLICY_FIX in alert.message


def test_the_report_highlights_runs_left_failed_by_column_name() -> None:
    """A row is highlighted when its failed run was not retried or its retry failed again, read by the
    report's column names (not positions): a new column moves nothing."""
    from payops.flows.settlements import REPORT_HEADERS, needs_a_look

    def row(**cells: str) -> list[str]:
        return [cells.get(h.replace(" ", "_"), "") for h in REPORT_HEADERS]

    assert needs_a_look(row(action="skipped")) and needs_a_look(row(action="alert"))
    assert needs_a_look(row(action="retried", retry_outcome="failed_partial"))
    assert not needs_a_look(row(action="retried", retry_outcome="settled"))
    assert not needs_a_look(row(action="none", outcome="failed_all"))  # its own outcome: the retry decides
