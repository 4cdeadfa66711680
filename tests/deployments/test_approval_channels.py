"""One front door, tried end to end on one `payops serve --sandbox` whose approval policy is "GHS 0:1, 30:2"
(issues 29 and 42): every way a run can start pauses for the count the policy gives its total, whatever its
parameters say, pays only after that many distinct approvers (never whoever started it, nor, for a run
created on Prefect directly, a holder of Prefect's login), and sends nothing before.

People act as the docs give their role, with nothing else (docs/operations.md, *Who holds what*): the
server's address (the home's record, or `PAYOPS_URL`) and their own token; no database, no key, no service
credential, no Prefect login. An operator holding exactly that tries every path around the controls; each is
refused in one line and nothing is paid. Channels: Prefect's API behind its login (`create_flow_run` with
``require_approval: false``), a deployment schedule, `payops payouts` and `payops payouts retry-failed`
through the server, and the console.
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
from payops.deployments.serve import ROOT
from payops.store import open_engine
from payops.store.approval_requests import ApprovalRequest

from tests.deployments.console_harness import PASSWORD, payops, payroll_rows, write_sheet
from tests.deployments.serve_harness import AllInOne, all_in_one

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
POLICY = "GHS 0:1, 30:2"  # 3 rows of payroll_rows (34.50) need two approvers, 1 or 2 rows one
PEOPLE = {"olu": "operator", "bea": "approver", "cat": "approver", "pam": "approver"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AllInOne]:
    """serve with an operator, three approvers (pam holds Prefect's login, as her admin recorded) and the
    first admin serve made."""
    tmp = tmp_path_factory.mktemp("channels")
    settings = {
        "PREFECT_SERVER_UI_ENABLED": "false",
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
        "PAYOPS_UPLOAD_URL": str(tmp / "uploads"),
        "PAYOPS_REPORT_URL": str(tmp / "reports"),
    }
    with all_in_one(tmp, PEOPLE, settings, policy=POLICY) as running:
        admin = admin_env(running, tmp / "admin")
        marked = payops(admin, "users", "prefect-login", "pam")
        assert marked.returncode == 0, marked.stderr
        yield running


def person(served: AllInOne, who: str, where: Path) -> dict[str, str]:
    """What the docs give a person: the server's address and their own token; an empty payops home and
    config of their own; no Prefect, no emulator settings."""
    env = {k: v for k, v in served.env.items() if not k.startswith(("PAYOPS_", "PREFECT_API"))}
    env |= {
        "PAYOPS_URL": served.console,
        "PAYOPS_API_TOKEN": served.tokens[who],
        "PAYOPS_HOME": str(where / "home"),
        "PAYOPS_CONFIG_DIR": str(where / "config"),
        "PREFECT_HOME": str(where / "prefect"),
    }
    return env


def admin_env(served: AllInOne, where: Path) -> dict[str, str]:
    """The first admin, logged in with `payops login` (the password serve wrote for them)."""
    env = {k: v for k, v in person(served, "olu", where).items() if k != "PAYOPS_API_TOKEN"}
    password = (served.payops_home / "first-admin-password").read_text().strip()
    logged = payops(env, "login", "--user", "admin", stdin=password + "\n")
    assert logged.returncode == 0, logged.stderr
    return env


def in_background(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "payops.deployments.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


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


def approve(served: AllInOne, run_id: str, who: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """`payops approve RUN` as ``who`` (their token), acknowledging the findings: no names checked (these
    sheets name nobody), and rows paid before (the sheets of this module pay the same payees, issue 47)."""
    args = ["approve", run_id, "--acknowledge", "no_name_column", "--acknowledge", "paid_before"]
    args += ["--comment", f"checked by {who}"]
    return payops(person(served, who, tmp / who), *args)


def final(served: AllInOne, run_id: str) -> str:
    states = {"COMPLETED", "CANCELLED", "FAILED", "CRASHED"}
    done = served.wait_for(lambda: served.flow_run(run_id)["state_type"] in states, 180, "the run final")
    assert done
    return str(served.flow_run(run_id)["state_name"])


def two_approvals_then_paid(served: AllInOne, run_id: str, rows: int, tmp: Path) -> None:
    before = served.payouts_posted()
    first = approve(served, run_id, "bea", tmp)
    assert first.returncode == 0 and "1 more approval needed" in first.stdout, first.stderr
    time.sleep(3)
    assert served.flow_run(run_id)["state_type"] == "PAUSED" and served.payouts_posted() == before
    second = approve(served, run_id, "cat", tmp)
    assert second.returncode == 0 and "continues" in second.stdout, second.stderr
    assert final(served, run_id).startswith("Completed")
    assert served.payouts_posted() == before + rows


def params(sheet: Path, label: str, **fields: Any) -> dict[str, Any]:
    return {"params": {"source": str(sheet), "label": label, "require_approval": False, **fields}}


def test_a_run_created_through_prefects_api_follows_the_policy_and_no_login_holder_approves_it(
    served: AllInOne, tmp_path: Path
) -> None:
    sheet = write_sheet(tmp_path / "api.xlsx", payroll_rows(3, prefix="API"))

    run_id = served.start_run("payout-spreadsheet", params(sheet, "api-run")["params"])
    found = request(served, "api-run")
    assert found.flow_run_id == run_id
    assert (found.required, found.channel, found.initiator, found.excluded) == (2, "prefect", None, "pam")
    own = approve(served, run_id, "pam", tmp_path)  # she could have started it: refused, nothing recorded
    assert own.returncode == 2 and "You hold Prefect's login" in own.stderr, own.stderr
    two_approvals_then_paid(served, run_id, 3, tmp_path)


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
    assert (found.required, found.channel, found.initiator, found.excluded) == (1, "prefect", None, "pam")
    before = served.payouts_posted()
    time.sleep(2)
    assert served.payouts_posted() == before  # nothing before its approval
    assert approve(served, found.flow_run_id, "pam", tmp_path).returncode == 2
    assert approve(served, found.flow_run_id, "bea", tmp_path).returncode == 0
    assert final(served, found.flow_run_id).startswith("Completed")
    assert served.payouts_posted() == before + 2


def test_the_cli_and_retry_failed_start_through_the_server_as_a_named_operator_who_cannot_approve(
    served: AllInOne, tmp_path: Path
) -> None:
    env = person(served, "olu", tmp_path / "olu")
    sheet = write_sheet(tmp_path / "cli.xlsx", payroll_rows(3, prefix="CLI", specials={1: "0002"}))
    cli = in_background(env, "payouts", str(sheet), "--label", "cli-run", "--json")
    try:
        found = request(served, "cli-run")
        assert (found.required, found.channel, found.initiator, found.excluded) == (2, "cli", "olu", "olu")
        own = approve(served, found.flow_run_id, "olu", tmp_path)  # the initiator: refused, nothing recorded
        assert own.returncode == 2 and "olu is operator; this needs the role approver" in own.stderr
        two_approvals_then_paid(served, found.flow_run_id, 3, tmp_path)
        out, err = cli.communicate(timeout=180)
    finally:
        cli.kill()
    assert cli.returncode == 0, err[-2000:]
    summary = json.loads(out)
    assert summary["started_by"] == "olu" and summary["payouts_by_status"] == {"delivered": 2, "failed": 1}
    assert summary["approval"]["approvers"] == ["bea", "cat"]

    retry = in_background(env, "payouts", "retry-failed", "cli-run", "--json")
    try:
        found = request(served, "cli-run-retry1")
        assert (found.required, found.channel, found.initiator) == (1, "cli", "olu")
        before = served.payouts_posted()
        assert approve(served, found.flow_run_id, "cat", tmp_path).returncode == 0
        out, err = retry.communicate(timeout=180)
    finally:
        retry.kill()
    assert retry.returncode == 0, err[-2000:]
    assert json.loads(out)["approval"]["approvers"] == ["cat"] and served.payouts_posted() == before + 1
    audit = payops(admin_env(served, tmp_path / "admin"), "audit", "list", "--action", "payops.run.started")
    assert re.search(r"\tolu\t[^\t]+\tpayops\.run\.started\trun:", audit.stdout), audit.stdout


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
    assert "needs approval from 2 approvers other than you" in page
    upload_id = re.search(r'name="upload_id" value="([^"]+)"', page).group(1)
    run_path = olu.post("/runs", data={"upload_id": upload_id, "csrf_token": token}).headers["location"]
    run_id = run_path.rsplit("/", 1)[1]
    found = request(served, "console run", run_id=run_id)
    assert (found.required, found.channel, found.initiator) == (2, "console", "olu")
    form = {"csrf_token": token, "decision": "approve", "acknowledge": ["no_name_column", "paid_before"]}
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


def test_an_operator_with_exactly_what_the_docs_give_them_cannot_get_around_the_controls(
    served: AllInOne, tmp_path: Path
) -> None:
    """The operator's shell: the server's address and olu's own token. Every path around approval is
    refused in one line, nothing is paid, and payops audits each refusal it sees."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    from payops.tasks.approval.approvals import ApprovalRefused, Requirement, Subject, check_approvals

    olu = person(served, "olu", tmp_path / "olu")
    sheet = write_sheet(tmp_path / "insider.xlsx", payroll_rows(3, prefix="INS"))
    run = in_background(olu, "payouts", str(sheet), "--label", "insider-run")
    try:
        found = request(served, "insider-run")
        before = served.payouts_posted()
        tries = {
            "add an approver": ["users", "add", "mal", "--role", "approver"],
            "mint a token for a colleague": ["users", "token", "bea"],
            "switch approvals off": ["approvals", "policy", "--set", "none"],
            "approve their own run": ["approve", "insider-run", "--acknowledge", "no_name_column"],
            "read the audit trail": ["audit", "list"],
        }
        for what, args in tries.items():
            said = payops({**olu, "LOGNAME": "admin", "USER": "admin"}, *args, stdin=PASSWORD + "\n")
            assert said.returncode == 2, (what, said.stdout, said.stderr)
            assert len(said.stderr.strip().splitlines()) == 1 and "Traceback" not in said.stderr, what
            one_line = r"error: olu is operator; this needs the role (admin|approver)\n"
            assert re.fullmatch(one_line, said.stderr), (what, said.stderr)

        # Sign an approval in bea's name: the signing key never leaves the server; one of their own making
        # is refused by the flow's check, and there is no way to hand it in: Prefect wants its login.
        with httpx.Client(base_url=f"{served.console}/api/v1", timeout=30) as api:
            published = api.get("/approval-key", headers={"Authorization": f"Bearer {served.tokens['olu']}"})
        assert published.status_code == 200 and "PRIVATE" not in published.text
        from payops.tasks.approval.approvals import sign_approval

        subject = Subject(found.flow_run_id, found.fingerprint, {"GHS": "34.50"}, found.rows)
        forged = sign_approval(Ed25519PrivateKey.generate(), subject, "bea")
        with pytest.raises(ApprovalRefused, match="not signed by this installation's approval key"):
            check_approvals(
                load_pem_public_key(published.json()["pem"].encode()), [forged], subject, Requirement(1)
            )
        resume = httpx.post(f"{served.api}/flow_runs/{found.flow_run_id}/resume", json={}, timeout=30)
        assert resume.status_code == 401

        # Read a secret through Prefect, pay at the service: neither holds anything of theirs.
        blocks = f"{served.api}/block_documents/filter?include_secrets=true"
        secrets_ = httpx.post(blocks, json={}, timeout=30)
        assert secrets_.status_code == 401
        bearer = {"Authorization": f"Bearer {served.tokens['olu']}"}
        body = {"amount": "5000.00", "currency": "GHS"}
        pay = httpx.post(f"{served.sandbox}/v1/payouts", json=body, headers=bearer, timeout=30)
        assert pay.status_code == 401

        # An approver cannot start a run through the server either (whoever starts one cannot approve it).
        bea = person(served, "bea", tmp_path / "bea")
        started = payops(bea, "payouts", str(sheet), "--label", "bea-run")
        assert started.returncode == 2 and "bea is approver; this needs the role operator" in started.stderr

        time.sleep(2)
        assert served.payouts_posted() == before  # nothing paid by any of it
        assert served.flow_run(found.flow_run_id)["state_type"] == "PAUSED"
        rejected = payops(bea, "approve", "insider-run", "--reject", "--comment", "an insider test")
        assert rejected.returncode == 0, rejected.stderr
        run.communicate(timeout=180)
    finally:
        run.kill()
    assert run.returncode == 3 and served.payouts_posted() == before
    admin = admin_env(served, tmp_path / "admin")
    denied = payops(admin, "audit", "list", "--actor", "olu", "--limit", "100")
    refusals = [line for line in denied.stdout.splitlines() if "\tpayops.access.denied\t" in line]
    assert len(refusals) >= len(tries), denied.stdout
    verified = payops(admin, "audit", "verify")  # from the CLI, no variable exported
    assert verified.returncode == 0, verified.stderr
    intact = r"audit trail intact: \d+ entries; \d+ compared with their Prefect events"
    assert re.search(intact, verified.stdout), verified.stdout


def prefect_retry(served: AllInOne, run_id: str) -> None:
    """`prefect flow-run retry RUN` as a holder of Prefect's login types it (Prefect's own CLI, its API
    address and login; nothing of payops): the run is scheduled again, and serve's runner takes it."""
    prefect = Path(sys.executable).with_name("prefect")
    env = {k: v for k, v in served.env.items() if not k.startswith("PREFECT_API")}
    env |= {"PREFECT_API_URL": served.api, "PREFECT_API_AUTH_STRING": served.auth_string}
    before = served.flow_run(run_id)["state_id"]
    retried = subprocess.run(
        [str(prefect), "flow-run", "retry", run_id], env=env, capture_output=True, text=True, timeout=60
    )
    assert retried.returncode == 0, retried.stdout + retried.stderr
    served.wait_for(lambda: served.flow_run(run_id)["state_id"] != before, 30, "the run scheduled again")


def run_summary(served: AllInOne, run_id: str, who: str = "olu") -> dict[str, Any]:
    """The run's summary as the payops server gives it to a person (its API, their token)."""
    headers = {"Authorization": f"Bearer {served.tokens[who]}"}
    answer = httpx.get(f"{served.console}/api/v1/runs/{run_id}", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["summary"]


def test_prefects_retry_of_an_approved_run_replays_it_without_asking_again(
    served: AllInOne, tmp_path: Path
) -> None:
    """Prefect's Retry (issue 43) of a run that was approved and paid: its approval still holds for the
    same rows, so the run goes on without asking, replays what it sent and pays nothing twice. Before, the
    retried run asked Prefect to pause under its first attempt's key, Prefect skipped the pause, and the
    run failed ("'NoneType' object has no attribute 'reject'")."""
    sheet = write_sheet(tmp_path / "retried.xlsx", payroll_rows(2, prefix="PRR"))
    run_id = served.start_run("payout-spreadsheet", params(sheet, "prefect-retried")["params"])
    request(served, "prefect-retried")
    before = served.payouts_posted()
    assert approve(served, run_id, "bea", tmp_path).returncode == 0
    assert final(served, run_id).startswith("Completed") and served.payouts_posted() == before + 2
    assert run_summary(served, run_id)["replayed_payouts"] == 0

    prefect_retry(served, run_id)
    assert final(served, run_id) == "Completed"
    assert served.payouts_posted() == before + 2  # replayed: nothing paid twice
    again = run_summary(served, run_id)
    assert again["replayed_payouts"] == 2 and again["payouts_by_status"] == {"delivered": 2}
    assert again["approval"]["approvers"] == ["bea"]  # carried over: nobody was asked again


def test_prefects_retry_of_a_run_not_approved_in_time_asks_again_and_pays_once_approved(
    served: AllInOne, tmp_path: Path
) -> None:
    """A run that ended "Not approved" (nobody approved in time), retried in Prefect: it pauses again (a
    pause key of its own attempt) and pays once approved."""
    sheet = write_sheet(tmp_path / "expired.xlsx", payroll_rows(2, prefix="PRX"))
    fields = {"approval_timeout_s": 20, "approval_reminder_s": 0}
    run_id = served.start_run("payout-spreadsheet", params(sheet, "prefect-expired", **fields)["params"])
    request(served, "prefect-expired")
    before = served.payouts_posted()
    assert final(served, run_id) == "Not approved" and served.payouts_posted() == before

    prefect_retry(served, run_id)
    request(served, "prefect-expired", run_id=run_id)  # asks again: paused under a key of its own attempt
    assert approve(served, run_id, "bea", tmp_path).returncode == 0
    assert final(served, run_id).startswith("Completed")
    assert served.payouts_posted() == before + 2
