"""Report links that open: flows link reports to the console (`{PAYOPS_CONSOLE_URL}/reports/<path under the
report root>`), the console serves exactly those files to a logged-in user, and reports land under the payops
home (never the working directory) when no folder is given. Also the run's name and tags from its label."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from payops.deployments.console import ConsoleSettings
from payops.flows.payouts import PayoutRunParams, payout_spreadsheet
from payops.flows.run_params import name_from_parameters
from payops.sandbox import SandboxServer
from payops.store.settings import PayopsSettings
from payops.tasks.reports.artifacts import report_link, summary_markdown
from prefect import tags

from tests.deployments.console_harness import good_sheet
from tests.deployments.test_console_security import FakeLauncher, add, login, make
from tests.flows.approval_support import prepared_home

CONSOLE = "http://testserver"  # the TestClient's own address: the flow's links then point at it


def test_a_report_under_the_root_links_to_the_console_else_shows_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYOPS_REPORT_URL", str(tmp_path / "reports"))
    monkeypatch.delenv("PAYOPS_CONSOLE_URL", raising=False)
    inside = str(tmp_path / "reports" / "20240101-000000-0000abcd" / "pay roll.xlsx")
    assert report_link(inside, PayopsSettings.from_env()) == f"`{inside}`"  # no console: code, never a link
    monkeypatch.setenv("PAYOPS_CONSOLE_URL", "http://127.0.0.1:8400/")
    settings = PayopsSettings.from_env()
    assert report_link(inside, settings) == (
        "[pay roll.xlsx](http://127.0.0.1:8400/reports/20240101-000000-0000abcd/pay%20roll.xlsx)"
    )
    for outside in [
        "/elsewhere/x.csv",
        str(tmp_path / "reports" / ".." / "x.csv"),
        str(tmp_path / "reportsX"),
    ]:
        assert report_link(outside, settings) == f"`{outside}`"
    files = {"xlsx": inside, "csv": "/elsewhere/L.csv"}
    markdown = summary_markdown({"label": "L", "report_files": files}, settings)
    assert "](http://127.0.0.1:8400/reports/" in markdown and "- csv: `/elsewhere/L.csv`" in markdown
    assert not re.search(r"\]\((?!https?://)", markdown)  # no markdown link to a bare path


def test_the_console_serves_reports_under_its_root_to_a_session_only(tmp_path: Path) -> None:
    root = tmp_path / "reports"
    (root / "20240101-000000-0000abcd").mkdir(parents=True)
    (root / "20240101-000000-0000abcd" / "run.csv").write_text("reference,payee\nR-1,Ama\n")
    (root / "L.json").write_text('{"outcome": "completed"}')
    (tmp_path / "secret.txt").write_text("not a report")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    client = make(tmp_path, FakeLauncher())
    anonymous = make(tmp_path, FakeLauncher())
    add(client, "olu", "operator")
    login(client)

    r = anonymous.get("/reports/L.json")
    assert r.status_code == 303 and r.headers["location"] == "/login"
    r = client.get("/reports/20240101-000000-0000abcd/run.csv")
    assert r.status_code == 200 and r.content == b"reference,payee\nR-1,Ama\n"
    assert r.headers["content-disposition"] == 'attachment; filename="run.csv"'
    assert client.get("/reports/L.json").json() == {"outcome": "completed"}
    for path in [
        "/reports/%2e%2e/secret.txt",
        "/reports/20240101-000000-0000abcd/%2e%2e/%2e%2e/secret.txt",
        "/reports/link.txt",  # a symlink out of the root
        "/reports/20240101-000000-0000abcd",  # a folder
        "/reports/missing.csv",
        "/reports/%2fetc%2fpasswd",
    ]:
        r = client.get(path)
        assert r.status_code == 404 and b"not a report" not in r.content, path


def _run(params: PayoutRunParams) -> Any:
    return asyncio.run(payout_spreadsheet(params, return_state=True))


async def _artifacts_and_run(flow_run_id: Any) -> tuple[list[Any], Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    async with get_client() as client:
        artifacts = await client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
        return artifacts, await client.read_flow_run(flow_run_id)


def test_a_flow_runs_artifact_link_opens_with_a_console_session(
    prefect_harness: None, emulator: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No report folder given, started from another working directory: the reports go under PAYOPS_HOME, the
    summary artifact links them to the console, and the link gives a logged-in user the file's bytes."""
    for key, value in emulator.env.items():
        monkeypatch.setenv(key, value)
    home, cwd = tmp_path / "home", tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.setenv("PAYOPS_HOME", prepared_home(home, operator=None)["PAYOPS_HOME"])
    monkeypatch.delenv("PAYOPS_REPORT_URL", raising=False)
    monkeypatch.setenv("PAYOPS_CONSOLE_URL", CONSOLE)
    monkeypatch.chdir(cwd)
    sheet = good_sheet(tmp_path / "november-payroll.xlsx", n=3, prefix="LNK")

    state = _run(PayoutRunParams(source=str(sheet), check_names=False))
    summary = state.result()
    label = summary["label"]
    assert list(cwd.iterdir()) == []  # nothing written into the working directory
    written = sorted(p.name for p in (home / "reports").iterdir())
    assert f"{label}.xlsx" in written and f"{label}.csv" in written and f"{label}.json" in written

    artifacts, flow_run = asyncio.run(_artifacts_and_run(state.state_details.flow_run_id))
    markdown = "\n".join(a.data for a in artifacts if a.type == "markdown" and isinstance(a.data, str))
    links = re.findall(r"\]\((http[^)]+)\)", markdown)
    xlsx = next(link for link in links if link.endswith(f"{label}.xlsx"))
    assert xlsx == f"{CONSOLE}/reports/{label}.xlsx"
    # The run is named after the sheet (no label given) and tagged with the label it paid under.
    assert flow_run.name == "november-payroll"
    assert label in flow_run.tags

    default_root = ConsoleSettings().reports  # the console's report root when none is configured
    assert default_root == str(home / "reports")
    console = make(tmp_path, FakeLauncher(), report_url=default_root)
    assert make(tmp_path, FakeLauncher()).get(xlsx).status_code == 303  # no session: the login page
    add(console, "olu", "operator")
    login(console)
    r = console.get(xlsx)
    assert r.status_code == 200 and r.content == (home / "reports" / f"{label}.xlsx").read_bytes()


def test_a_labelled_run_is_named_and_tagged_after_its_label(
    prefect_harness: None, emulator: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in emulator.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PAYOPS_REPORT_URL", str(tmp_path / "reports"))
    sheet = good_sheet(tmp_path / "sheet.xlsx", n=2, prefix="NAM")
    params = PayoutRunParams(source=str(sheet), label="payroll-2026-11", dry_run=True, check_names=False)
    with tags("team-a"):  # the tags a run is created with (a deployment's, the CLI's) are kept
        state = _run(params)
    _artifacts, flow_run = asyncio.run(_artifacts_and_run(state.state_details.flow_run_id))
    assert flow_run.name == "payroll-2026-11"
    assert sorted(flow_run.tags) == ["payroll", "payroll-2026-11", "team-a"]  # payroll: a payout run
    # created already tagged with its label (a deployment's tag): the tag is not added twice
    with tags("payroll-2026-11"):
        again = _run(params)
    _artifacts, flow_run = asyncio.run(_artifacts_and_run(again.state_details.flow_run_id))
    assert sorted(flow_run.tags) == ["payroll", "payroll-2026-11"]  # each tag once
    assert (
        name_from_parameters({"params": {"label": "", "source": "s3://bucket/in/Pay Nov.csv"}}) == "Pay Nov"
    )
    assert name_from_parameters({"params": PayoutRunParams(source="/x/y.xlsx", label="L1")}) == "L1"
