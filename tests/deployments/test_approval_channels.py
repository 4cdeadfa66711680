"""Approval holds on every channel (issue 29): one `payops serve --sandbox` whose approval policy is
"GHS 0:1, 30:2", and a payout run started each way a run can start. Each pauses for the count the policy
gives its total, whatever its parameters say, pays only after that many distinct approvers (never its
initiator), and sends nothing before.

Channels: Prefect's API (`create_flow_run` on the deployment with ``require_approval: false``), a deployment
schedule, `payops payouts` (as an operator, by personal API token), `payops payouts retry-failed`, and the
console. Approvals are given with `payops approve` and in the console, as approvers do.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from payops.deployments.processes import read_env_file
from payops.deployments.serve import ROOT
from payops.store import open_engine
from payops.store.approval_requests import ApprovalRequest

from tests.deployments.console_harness import PASSWORD, payroll_rows, write_sheet
from tests.deployments.serve_harness import AllInOne, all_in_one, payops_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
POLICY = "GHS 0:1, 30:2"  # 3 rows of payroll_rows (34.50) need two approvers, 1 or 2 rows one


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AllInOne]:
    tmp = tmp_path_factory.mktemp("channels")
    settings = {
        "PREFECT_SERVER_UI_ENABLED": "false",
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
        "PAYOPS_UPLOAD_URL": str(tmp / "uploads"),
        "PAYOPS_REPORT_URL": str(tmp / "reports"),
    }
    users = {"olu": "operator", "bea": "approver", "cat": "approver"}
    with all_in_one(tmp, users, settings, policy=POLICY) as running:
        yield running


def cli_env(served: AllInOne) -> dict[str, str]:
    """A terminal beside serve: its homes (whose record gives its Prefect API and login), its emulator, its
    approval key."""
    sandbox = read_env_file(served.payops_home / "sandbox.env")
    key = (served.payops_home / "approval-key").read_text().strip()
    return {**served.env, **sandbox, "PAYOPS_APPROVAL_KEY": key}


def request(served: AllInOne, label: str, timeout: float = 180, *, run_id: str = "") -> ApprovalRequest:
    """The approval request a run labelled ``label`` (or the run ``run_id``) recorded, once it waits."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    engine = open_engine(f"sqlite:///{served.payops_home / 'payops.sqlite3'}")

    def waiting() -> ApprovalRequest | None:
        with Session(engine) as db:
            which = ApprovalRequest.flow_run_id == run_id if run_id else ApprovalRequest.label == label
            found = db.scalar(select(ApprovalRequest).where(which))
            if found is not None and found.state == "waiting":
                db.expunge(found)
                return found
            return None

    try:
        found = served.wait_for(waiting, timeout, f"run {label} waiting for approval")
        served.wait_for(lambda: served.flow_run(found.flow_run_id)["state_type"] == "PAUSED", 30, "paused")
        return found
    finally:
        engine.dispose()


def approve(served: AllInOne, run_id: str, user: str) -> subprocess.CompletedProcess[str]:
    """`payops approve RUN --user USER`, acknowledging the name-check findings (these sheets name nobody)."""
    return subprocess.run(
        [sys.executable, "-m", "payops.deployments.cli", "approve", run_id, "--user", user]
        + ["--acknowledge", "no_name_column", "--comment", f"checked by {user}"],
        input=PASSWORD + "\n",
        text=True,
        cwd=ROOT,
        env=cli_env(served),
        capture_output=True,
        timeout=120,
    )


def final(served: AllInOne, run_id: str) -> str:
    states = {"COMPLETED", "CANCELLED", "FAILED", "CRASHED"}
    done = served.wait_for(lambda: served.flow_run(run_id)["state_type"] in states, 180, "the run final")
    assert done
    return str(served.flow_run(run_id)["state_name"])


def two_approvals_then_paid(served: AllInOne, run_id: str, rows: int) -> None:
    before = served.payouts_posted()
    first = approve(served, run_id, "bea")
    assert first.returncode == 0 and "1 more approval needed" in first.stdout, first.stderr
    time.sleep(3)
    assert served.flow_run(run_id)["state_type"] == "PAUSED" and served.payouts_posted() == before
    second = approve(served, run_id, "cat")
    assert second.returncode == 0 and "continues" in second.stdout, second.stderr
    assert final(served, run_id).startswith("Completed")
    assert served.payouts_posted() == before + rows


def params(sheet: Path, label: str, **fields: Any) -> dict[str, Any]:
    return {"params": {"source": str(sheet), "label": label, "require_approval": False, **fields}}


def test_a_run_created_through_prefects_api_follows_the_policy(served: AllInOne, tmp_path: Path) -> None:
    sheet = write_sheet(tmp_path / "api.xlsx", payroll_rows(3, prefix="API"))

    run_id = served.start_run("payout-spreadsheet", params(sheet, "api-run")["params"])
    found = request(served, "api-run")
    assert found.flow_run_id == run_id
    assert (found.required, found.channel, found.initiator, found.excluded) == (2, "prefect", None, "")
    two_approvals_then_paid(served, run_id, 3)


def test_a_scheduled_run_follows_the_policy(served: AllInOne, tmp_path: Path) -> None:
    sheet = write_sheet(tmp_path / "scheduled.xlsx", payroll_rows(2, prefix="SCH"))
    deployment = served.deployment_id("payout-spreadsheet")
    anchor = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    schedule = {
        "schedule": {"interval": 86400, "anchor_date": anchor, "timezone": "UTC"},
        "active": True,
        "max_scheduled_runs": 1,
        "parameters": params(sheet, "scheduled-run"),
    }

    def scheduled() -> bool | None:
        r = served.prefect("POST", f"/deployments/{deployment}/schedules", json=[schedule], timeout=30)
        if r.status_code == 503:  # a busy server on SQLite: asked again, as Prefect's client does
            return None
        assert r.status_code == 201, r.text
        return True

    served.wait_for(scheduled, 90, "the schedule added")
    found = request(served, "scheduled-run", timeout=150)
    assert served.flow_run(found.flow_run_id)["auto_scheduled"] is True  # made by Prefect's scheduler
    assert (found.required, found.channel, found.initiator) == (1, "prefect", None)
    before = served.payouts_posted()
    time.sleep(2)
    assert served.payouts_posted() == before  # nothing before its approval
    assert approve(served, found.flow_run_id, "bea").returncode == 0
    assert final(served, found.flow_run_id).startswith("Completed")
    assert served.payouts_posted() == before + 2


def test_the_cli_and_retry_failed_start_as_a_named_operator_who_cannot_approve(
    served: AllInOne, tmp_path: Path
) -> None:
    env = cli_env(served)
    token = payops_cli(env, "users", "token", "olu", "--name", "ci").strip().splitlines()[0]
    env["PAYOPS_API_TOKEN"] = token
    sheet = write_sheet(tmp_path / "cli.xlsx", payroll_rows(3, prefix="CLI", specials={1: "0002"}))
    reports = tmp_path / "reports"
    args = [sys.executable, "-m", "payops.deployments.cli", "payouts"]
    cli = subprocess.Popen(
        [*args, str(sheet), "--label", "cli-run", "--report-dir", str(reports), "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found = request(served, "cli-run")
        assert (found.required, found.channel, found.initiator, found.excluded) == (2, "cli", "olu", "olu")
        own = approve(served, found.flow_run_id, "olu")  # the initiator: refused, nothing recorded
        assert own.returncode == 2 and "Only approvers" in own.stderr
        two_approvals_then_paid(served, found.flow_run_id, 3)
        out, err = cli.communicate(timeout=180)
    finally:
        cli.kill()
    assert cli.returncode == 0, err[-2000:]
    summary = json.loads(out)
    assert summary["started_by"] == "olu" and summary["payouts_by_status"] == {"delivered": 2, "failed": 1}
    assert summary["approval"]["approvers"] == ["bea", "cat"]

    retry = subprocess.Popen(
        [*args, "retry-failed", "cli-run", "--report-dir", str(reports), "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found = request(served, "cli-run-retry1")
        assert (found.required, found.channel, found.initiator) == (1, "cli", "olu")
        before = served.payouts_posted()
        assert approve(served, found.flow_run_id, "cat").returncode == 0
        out, err = retry.communicate(timeout=180)
    finally:
        retry.kill()
    assert retry.returncode == 0, err[-2000:]
    assert json.loads(out)["approval"]["approvers"] == ["cat"] and served.payouts_posted() == before + 1
    audit = payops_cli(env, "audit", "list", "--action", "payops.run.started")
    assert "\tolu\tcli\tpayops.run.started\tlabel:cli-run\t" in audit


def test_a_console_run_needs_approvers_other_than_the_operator(served: AllInOne, tmp_path: Path) -> None:
    def session(name: str) -> tuple[httpx.Client, str]:
        client = httpx.Client(base_url=served.console, timeout=60)
        token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
        form = {"username": name, "password": PASSWORD, "csrf_token": token}
        assert client.post("/login", data=form).status_code == 303
        page = client.get("/runs").text
        return client, re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)

    olu, token = session("olu")
    sheet = write_sheet(tmp_path / "console.xlsx", payroll_rows(3, prefix="CNS"))
    with sheet.open("rb") as fh:
        page = olu.post("/upload", data={"csrf_token": token}, files={"sheet": ("console.xlsx", fh)}).text
    assert "needs 2 approvals" in page
    upload_id = re.search(r'name="upload_id" value="([^"]+)"', page).group(1)
    run_path = olu.post("/runs", data={"upload_id": upload_id, "csrf_token": token}).headers["location"]
    run_id = run_path.rsplit("/", 1)[1]
    found = request(served, "console run", run_id=run_id)
    assert (found.required, found.channel, found.initiator) == (2, "console", "olu")
    form = {"csrf_token": token, "decision": "approve", "acknowledge": "no_name_column"}
    assert olu.post(f"{run_path}/approval", data=form).status_code == 403  # the operator who started it
    before = served.payouts_posted()
    for name in ("bea", "cat"):
        client, own_token = session(name)
        missing = client.post(f"{run_path}/approval", data={"csrf_token": own_token, "decision": "approve"})
        assert missing.status_code == 400 and "Acknowledge" in missing.text  # the findings first
        assert client.post(f"{run_path}/approval", data={**form, "csrf_token": own_token}).status_code == 303
        client.close()
    assert final(served, run_id).startswith("Completed") and served.payouts_posted() == before + 3
    olu.close()
