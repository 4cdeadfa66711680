"""`payops serve --sandbox` end to end: Prefect server, emulator, console and the served deployments wired
together; Prefect's API behind serve's login; a sheet uploaded to the console is paid through the served
deployment; Ctrl-C stops everything."""

from __future__ import annotations

import base64
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from payops.deployments.serve import ROOT, SHUTDOWN_S
from payops.deployments.webhook_endpoint import subscribed_types
from payops.tasks.events.payment_events import DEFAULT_FORWARD

from tests.deployments.console_harness import PASSWORD, good_sheet
from tests.deployments.serve_harness import AllInOne, busy_machine, prefect_servers
from tests.deployments.serve_harness import all_in_one as serve_all_in_one
from tests.deployments.serve_harness import wait_until as wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def all_in_one(tmp_path: Path) -> Iterator[AllInOne]:
    # An operator to upload with; the first admin is created by `payops serve` itself. Prefect's database
    # too: this home's first start migrates it (the other serves of the suite start on a migrated copy).
    settings = {
        "PAYOPS_UPLOAD_URL": str(tmp_path / "uploads"),
        "PAYOPS_REPORT_URL": str(tmp_path / "reports"),
        "PREFECT_SERVER_UI_ENABLED": "false",
    }
    with serve_all_in_one(
        tmp_path, {"olu": "operator"}, settings, policy="none", fresh_prefect=True
    ) as served:
        yield served


def test_serve_pays_an_upload_through_the_served_deployment_and_stops_cleanly(
    all_in_one: AllInOne, tmp_path: Path
) -> None:
    served = all_in_one
    proc, log = served.proc, served.log
    console, api = served.console, served.api
    assert console == f"http://127.0.0.1:{served.ports['console']}"
    assert api == f"http://127.0.0.1:{served.ports['port']}/api"
    wait_for(lambda: "serving" in log.read_text(), 150, "serving deployments", proc, log)
    text = log.read_text()
    assert PASSWORD not in text
    admin_file = tmp_path / "payops-home" / "first-admin-password"
    assert f"first admin created: user 'admin', password in {admin_file}" in text
    assert "approval policy: no approval needed (set by an admin)" in text  # the policy in force, said
    assert admin_file.stat().st_mode & 0o777 == 0o600 and admin_file.read_text().strip() not in text
    prefect_is_behind_the_login(served, text)
    for missing in ("events-catch-up", "daily-transactions-report"):
        if not (ROOT / "flows" / f"{'events' if 'events' in missing else 'transactions'}.py").exists():
            assert f"skipping deployment {missing!r}" in text

    expected = {"payout-spreadsheet", "retry-failed-settlements", "settle-now"}

    def registered() -> list[dict[str, Any]] | None:
        found = served.prefect("POST", "/deployments/filter", json={}).json()
        return found if expected <= {d["name"] for d in found} else None

    deployments = wait_for(registered, 60, "deployments registered", proc, log)
    retry = next(d for d in deployments if d["name"] == "retry-failed-settlements")
    assert retry["schedules"] and retry["schedules"][0]["schedule"]["cron"] == "5 * * * *"

    with httpx.Client(base_url=console, timeout=30) as client:
        token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
        form = {"username": "olu", "password": PASSWORD, "csrf_token": token}
        assert client.post("/login", data=form).status_code == 303
        token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/").text).group(1)
        with good_sheet(tmp_path / "serve.xlsx", n=4, prefix="SRV").open("rb") as fh:
            page = client.post("/upload", data={"csrf_token": token}, files={"sheet": ("serve.xlsx", fh)})
        upload_id = re.search(r'name="upload_id" value="([^"]+)"', page.text).group(1)
        r = client.post("/runs", data={"upload_id": upload_id, "csrf_token": token})
        assert r.status_code == 303
        run_path = r.headers["location"]
        page = wait_for(
            lambda: (p := client.get(run_path).text) and 'id="outcome"' in p and p,
            120,
            "the run completed",
            proc,
            log,
        )
        assert '<span id="outcome">completed</span>' in page and "delivered 3" in page and "failed 1" in page
        assert f"http://127.0.0.1:{served.ports['port']}/runs/flow-run/" in page  # link to the Prefect UI
        # The run's artifacts link its reports to this console; the link opens with the session.
        flow_run_id = run_path.rsplit("/", 1)[1]
        body = {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}}
        artifacts = served.prefect("POST", "/artifacts/filter", json=body).json()
        text = "\n".join(a["data"] for a in artifacts if isinstance(a.get("data"), str))
        links = re.findall(r"\]\((http[^)]+\.xlsx)\)", text)
        assert links and all(link.startswith(f"{console}/reports/") for link in links), text[:500]
        report = client.get(links[0])
        assert report.status_code == 200 and report.content[:2] == b"PK"  # an xlsx (zip) file
        flow_run = served.flow_run(flow_run_id)
        assert flow_run["name"] == "serve"  # the sheet's name (no label given)
        # A deployment run, started at once in a warm process of the console's fork server.
        assert flow_run["deployment_id"] == served.deployment_id("payout-spreadsheet")
        states = served.prefect("GET", f"/flow_run_states/?flow_run_id={flow_run_id}").json()
        assert [st["message"] for st in states if st["type"] == "PENDING"] == ["taken by a warm process"]
        assert any(tag.startswith("sheet-") for tag in flow_run["tags"])  # the label it paid under
        # The run's own process (started by serve's runner) reached Prefect with the login: it set its states
        # (the run completed) and its task runs' events came through Prefect's events socket.
        wait_for(lambda: task_run_events(served, flow_run_id), 60, "the run's task-run events", proc, log)

    # The first admin, logged in with `payops login` beside serve (no PREFECT_API_URL, no key), verifies the
    # audit trail through the server, which compares it with the Prefect events (the copies of olu's login).
    verified: list[str] = []

    password = (served.payops_home / "first-admin-password").read_text()
    own_config = {"PAYOPS_CONFIG_DIR": str(tmp_path / "admin-config")}
    logged = served.payops("login", "--user", "admin", env=own_config, stdin=password)
    assert logged.returncode == 0, logged.stderr

    def audit_compared() -> int | None:
        done = served.payops("audit", "verify", env=own_config, timeout=120)
        verified.append(done.stdout + done.stderr)
        assert done.returncode == 0, verified[-1]
        found = re.search(r"intact: \d+ entries; (\d+) compared with their Prefect events", done.stdout)
        return int(found.group(1)) if found else None  # none yet: the copies are written a moment later

    assert "PREFECT_API_URL" not in served.env
    try:
        wait_for(audit_compared, 90, "audit copies compared with the Prefect events", proc, log)
    except AssertionError:
        raise AssertionError(f"payops audit verify said: {verified[-1:]}") from None

    # Webhooks live: the console's receiver is the emulator's endpoint for the forward filter's types, its
    # deliveries are accepted (2xx, not 503 "not configured"), and the relay brings them to Prefect.
    sandbox = f"{served.sandbox}/_sandbox/businesses/demo/test/webhook-endpoints"
    endpoints = httpx.get(sandbox, timeout=5).json()["items"]
    assert [e["url"] for e in endpoints] == [f"{console}/webhooks/payments"]
    assert endpoints[0]["eventTypes"] == subscribed_types(DEFAULT_FORWARD)
    assert "payout.status_changed" in endpoints[0]["eventTypes"] and endpoints[0]["enabled"]

    def delivered() -> list[dict[str, Any]] | None:
        items = httpx.get(f"{sandbox}/{endpoints[0]['id']}/deliveries", timeout=5).json()["items"]
        done = [d for d in items if d["status"] == "succeeded"]
        return items if done else None

    deliveries = wait_for(delivered, 60, "a webhook delivery accepted", proc, log)
    codes = {a["statusCode"] for d in deliveries for a in d["attempts"]}
    assert 200 in codes and 503 not in codes, codes

    def payout_events() -> list[dict[str, Any]] | None:
        body = {"filter": {"event": {"prefix": ["payments.payout."]}}, "limit": 50}
        found = served.prefect("POST", "/events/filter", json=body).json()["events"]
        return found or None

    events = wait_for(payout_events, 60, "a payments.payout.* event in Prefect", proc, log)
    assert any(e["resource"]["payments.status"] == "failed" for e in events)
    assert not [line for line in log.read_text().splitlines() if "whsec_" in line]  # the secret never logged

    children = psutil.Process(proc.pid).children(recursive=True)
    assert len(children) >= 3  # prefect server, emulator, console (+ their own children)
    # One Prefect server per `payops serve`: the runner and the template resolution use it, never a hidden
    # temporary server of their own (which would share the SQLite file and race it).
    assert "temporary server" not in log.read_text().lower()
    servers = prefect_servers(children)
    assert len(servers) == 1, [c.cmdline() for c in servers]
    # SIGINT to serve's own process (a supervisor's Ctrl-C) on a busy machine: everything ends within seconds.
    with busy_machine():
        start = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 0
        took = time.monotonic() - start
        gone, alive = psutil.wait_procs(children, timeout=1)
    assert took < SHUTDOWN_S, f"stopped after {took:.1f} s:\n{log.read_text()[-2000:]}"
    assert alive == [], f"left running: {[p.pid for p in alive]}"
    assert "SIGINT received" in log.read_text() and log.read_text().rstrip().endswith("stopped")
    # The runner's flow processes and the console authenticated all along (a refused events socket is only
    # warned about), and the login was written nowhere but its file.
    said = log.read_text()
    refused = ("Unauthorized", "Unable to connect to the events WebSocket")
    assert not [r for r in refused if r in said], said[-3000:]
    assert served.auth_string not in said
    for path in (served.payops_home / "serve-logs").iterdir():
        assert served.auth_string not in path.read_text(errors="replace"), path


def prefect_is_behind_the_login(served: AllInOne, said: str) -> None:
    """Prefect's API refuses what matters without serve's login (secret blocks, new flow runs, deployments)
    and answers with it; its health check stays open; the login is a 0600 file serve names, never prints,
    and gives to no child that does not talk to Prefect."""
    login_file = served.payops_home / "prefect-auth"
    assert login_file.stat().st_mode & 0o777 == 0o600
    assert f"Prefect login (the Prefect UI asks for it): {login_file}" in said
    assert served.auth_string not in said and len(served.auth_string) >= 32
    assert httpx.get(f"{served.api}/health", timeout=10).status_code == 200
    flow = served.prefect("POST", "/flows/", json={"name": "login-check"})
    assert flow.status_code in (200, 201), flow.text
    asks = [
        ("POST", "/block_documents/filter?include_secrets=true", {}, 200),
        ("POST", "/flow_runs/", {"flow_id": flow.json()["id"], "name": "login-check"}, 201),
        ("POST", "/deployments/filter", {}, 200),
    ]
    wrong = base64.b64encode(b"not-the-login").decode()
    for method, path, body, status in asks:
        for headers in ({}, {"Authorization": f"Basic {wrong}"}):
            refused = httpx.request(method, f"{served.api}{path}", json=body, headers=headers, timeout=10)
            assert refused.status_code == 401, (path, refused.status_code, refused.text)
        answered = served.prefect(method, path, json=body)
        assert answered.status_code == status, (path, answered.status_code, answered.text)
    for line, env in child_environments(served.proc.pid).items():
        if "prefect_app" in line:
            assert env.get("PREFECT_SERVER_API_AUTH_STRING") == served.auth_string
        elif " sandbox " in f"{line} ":
            assert not {"PREFECT_API_AUTH_STRING", "PREFECT_SERVER_API_AUTH_STRING"} & env.keys()
        elif "payops.deployments.console" in line:
            assert env.get("PREFECT_API_AUTH_STRING") == served.auth_string
            assert "PREFECT_SERVER_API_AUTH_STRING" not in env


def child_environments(pid: int) -> dict[str, dict[str, str]]:
    """Command line → environment of each running child of ``pid``; one that ends meanwhile (a scheduled
    run's flow process: some deployments run every few minutes) is left out."""
    found = {}
    for child in psutil.Process(pid).children():
        try:
            found[" ".join(child.cmdline())] = child.environ()
        except psutil.NoSuchProcess:  # ZombieProcess included
            continue
    return found


def task_run_events(served: AllInOne, flow_run_id: str) -> list[dict[str, Any]] | None:
    """The ``prefect.task-run.*`` events of the flow run (its process emits them over the events socket)."""
    body = {"filter": {"event": {"prefix": ["prefect.task-run."]}}, "limit": 50}
    found = served.prefect("POST", "/events/filter", json=body).json()["events"]
    mine = f"prefect.flow-run.{flow_run_id}"
    return [e for e in found if any(r["prefect.resource.id"] == mine for r in e["related"])] or None
