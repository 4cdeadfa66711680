"""The payops server is the one front door (issue 42): its JSON API checks who calls and their role on every
call, and the CLI is its client with nothing but the server's address and the person's own token.

Against a console in local single-process mode (the flow runs in a thread of the server, on the session's
Prefect test server, paying the module's emulator). The CLI runs as a separate process in a bare environment:
a fresh payops home and config folder, no database URL, no key, no service credential.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from payops.deployments.processes import ROOT
from payops.store.approvals import state_policy
from payops.store.audit import search

from tests.deployments.browser_harness import local_console, payouts_at
from tests.deployments.console_harness import PASSWORD, bad_sheet, good_sheet, payops, serve_in_thread

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def server(
    prefect_harness: None, emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """The server with an admin ``ada``, an operator ``olu`` and approvers ``bea`` and ``cat``, each with a
    personal token."""
    app, launcher = local_console(tmp_path, emulator, monkeypatch)
    state = app.state.console
    tokens = {}
    for name, role in {"ada": "admin", "olu": "operator", "bea": "approver", "cat": "approver"}.items():
        state.users.add(name, role, PASSWORD)
        tokens[name] = state.users.issue_token(name, "tests")
    with serve_in_thread(app) as url:
        yield {"url": url, "state": state, "tokens": tokens, "tmp": tmp_path, "emulator": emulator}
    launcher.join(60)


def bare_env(server: dict[str, Any], who: str | None, where: Path) -> dict[str, str]:
    """A person's shell: the server's address and (when ``who``) their token, an empty payops home and config
    folder of their own; none of the server's settings, keys or credential."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAYOPS_", "PREFECT_API"))}
    env.update(
        {
            "PAYOPS_URL": server["url"],
            "PAYOPS_HOME": str(where / "home"),
            "PAYOPS_CONFIG_DIR": str(where / "config"),
            "PREFECT_HOME": str(where / "prefect"),
        }
    )
    if who:
        env["PAYOPS_API_TOKEN"] = server["tokens"][who]
    return env


def api(server: dict[str, Any], who: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {server['tokens'][who]}"} if who else {}
    return httpx.Client(base_url=f"{server['url']}/api/v1", headers=headers, timeout=30)


def audited(server: dict[str, Any], actor: str, action: str) -> list[Any]:
    return search(server["state"].engine, actor=actor, action=f"payops.{action}", limit=50)


def test_every_call_names_a_person_whose_role_allows_it(server: dict[str, Any]) -> None:
    with api(server, None) as anonymous:
        answer = anonymous.get("/runs")
        assert answer.status_code == 401 and "log in" in answer.json()["detail"]
        forged = anonymous.get("/users", headers={"Authorization": "Bearer pyo_not-a-token"})
        assert forged.status_code == 401
        guessed = anonymous.get("/me", auth=("olu", "wrong password, long enough"))
        assert guessed.status_code == 401 and "wrong user name or password" in guessed.json()["detail"]
        assert anonymous.get("/me", auth=("olu", PASSWORD)).json() == {"name": "olu", "role": "operator"}
    assert audited(server, "olu", "login.failed")
    with api(server, "olu") as olu:
        for method, path, body in [
            ("GET", "/users", None),
            ("POST", "/users", {"name": "mal", "role": "approver", "password": "x" * 20}),
            ("POST", "/users/bea/tokens", {"purpose": "mine now"}),
            ("POST", "/users/ada/disable", None),
            ("PUT", "/approval-policy", {"policy": "none"}),
            ("GET", "/audit", None),
        ]:
            answer = olu.request(method, path, json=body)
            assert answer.status_code == 403, (path, answer.text)
            assert answer.json()["detail"] == "olu is operator; this needs the role admin"
    assert len(audited(server, "olu", "access.denied")) == 6
    with api(server, "bea") as bea:
        started = bea.post("/runs", files={"sheet": ("s.csv", b"a,b\n")})
        assert started.status_code == 403 and "needs the role operator" in started.json()["detail"]
    with api(server, "ada") as ada:
        names = {u["name"] for u in ada.get("/users").json()}
        assert names == {"ada", "olu", "bea", "cat"}
        assert ada.put("/approval-policy", json={"policy": "GHS 0:1; 0:1"}).status_code == 200
    entry = audited(server, "ada", "rules.changed")[0]
    assert entry.actor == "ada"  # the authenticated user, never an environment variable


def test_the_cli_pays_through_the_server_with_nothing_but_its_token(
    server: dict[str, Any], tmp_path: Path
) -> None:
    sheet = good_sheet(tmp_path / "payroll.xlsx", n=6, prefix="FDR")
    env = bare_env(server, "olu", tmp_path / "olu")
    before = payouts_at(server["emulator"])
    paid = payops(env, "payouts", str(sheet), "--label", "front-door-1", "--json")
    assert paid.returncode == 0, paid.stderr[-2000:]
    summary = json.loads(paid.stdout)
    assert summary["outcome"] == "completed" and summary["started_by"] == "olu"
    assert summary["payouts_by_status"] == {"delivered": 5, "failed": 1}
    assert payouts_at(server["emulator"]) == before + 6
    assert not (tmp_path / "olu" / "home").exists() or not any((tmp_path / "olu" / "home").iterdir())

    shown = payops(env, "runs", "show", "front-door-1")
    assert shown.returncode == 0 and "state: Completed with failures" in shown.stdout, shown.stderr

    refused = payops(env, "payouts", str(bad_sheet(tmp_path / "bad.xlsx")), "--label", "front-door-bad")
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "run front-door-bad: invalid_input" in refused.stdout
    assert "row 3, column amount" in refused.stdout
    assert payouts_at(server["emulator"]) == before + 6

    reports = tmp_path / "mine"
    again = payops(env, "payouts", str(sheet), "--label", "front-door-1", "--report-dir", str(reports))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "replayed" in again.stdout and payouts_at(server["emulator"]) == before + 6  # nothing paid twice
    assert (reports / "front-door-1.xlsx").is_file()

    own_credential = payops(env, "payouts", str(sheet), "--credentials-block", "someone-elses")
    assert own_credential.returncode == 2 and "credential its workers hold" in own_credential.stderr

    checked = payops(env, "reconcile", "--run", "front-door-1", "--json")  # on the server's workers
    assert checked.returncode == 0, checked.stderr[-2000:]
    result = json.loads(checked.stdout)
    facts = (result["scope"], result["label"], result["rows"], result["differences"])
    assert facts == ("run", "front-door-1", 6, 0), result
    history = json.loads(payops(env, "reconcile", "history", "--run", "front-door-1", "--json").stdout)
    assert history[0]["id"] == result["check_id"] and len(history) == 3  # both runs' ends, and this one


def test_approvers_approve_through_the_server_and_the_operator_cannot(
    server: dict[str, Any], tmp_path: Path
) -> None:
    state_policy(server["state"].engine, "0:1")
    sheet = good_sheet(tmp_path / "approve.xlsx", n=3, prefix="APR")
    olu = bare_env(server, "olu", tmp_path / "olu")
    before = payouts_at(server["emulator"])
    run = subprocess.Popen(
        [sys.executable, "-m", "payops.deployments.cli", "payouts", str(sheet), "--label", "fd-approve"],
        cwd=ROOT,
        env=olu,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with api(server, "bea") as bea:
            deadline = time.monotonic() + 120
            while not bea.get("/runs/fd-approve").json().get("paused"):
                assert time.monotonic() < deadline and run.poll() is None, "the run never paused"
                time.sleep(0.5)
            waiting = bea.get("/runs/fd-approve").json()["approval"]
        assert waiting["required"] == 1 and waiting["excluded"] == ["olu"]
        # `runs show` of the paused run: what it asks approval for and what to acknowledge (issue 43: it
        # printed "rows: None   amount: None").
        shown = payops(olu, "runs", "show", "fd-approve")
        assert shown.returncode == 0, shown.stderr
        assert "  rows: 3   to pay: GHS 34.50" in shown.stdout and "None" not in shown.stdout, shown.stdout
        assert "to acknowledge: no_name_column" in shown.stdout
        own = payops(olu, "approve", "fd-approve", "--acknowledge", "no_name_column")
        assert own.returncode == 2 and "olu is operator; this needs the role approver" in own.stderr
        missing = payops(bare_env(server, "bea", tmp_path / "bea"), "approve", "fd-approve")
        assert missing.returncode == 2 and "Acknowledge" in missing.stderr
        assert payouts_at(server["emulator"]) == before
        approved = payops(
            bare_env(server, "bea", tmp_path / "bea"),
            "approve",
            "fd-approve",
            "--acknowledge",
            "no_name_column",
            "--comment",
            "checked",
            "--acknowledge",
            "paid_before",  # this home paid these payees and amounts before (issue 47)
        )
        assert approved.returncode == 0 and "continues" in approved.stdout, approved.stderr
        out, err = run.communicate(timeout=180)
    finally:
        run.kill()
    assert run.returncode == 0, err[-2000:]
    assert "waits for 1 more approval of 1, not olu" in err
    assert payouts_at(server["emulator"]) == before + 3
    assert audited(server, "bea", "run.approved") and audited(server, "olu", "access.denied")


def test_login_keeps_a_personal_token_in_the_users_own_config_and_logout_revokes_it(
    server: dict[str, Any], tmp_path: Path
) -> None:
    env = bare_env(server, None, tmp_path / "cat")
    assert payops(env, "runs").returncode == 2  # not logged in: one line, exit 2
    logged = payops(env, "login", "--user", "cat", stdin=PASSWORD + "\n")
    assert logged.returncode == 0 and "as cat (approver)" in logged.stdout, logged.stderr
    kept = tmp_path / "cat" / "config" / "logins.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    token = json.loads(kept.read_text())[server["url"]]["token"]
    assert payops(env, "runs").returncode == 0
    assert payops(env, "logout").returncode == 0
    assert json.loads(kept.read_text()) == {}
    with httpx.Client(base_url=f"{server['url']}/api/v1", timeout=30) as client:
        assert client.get("/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_the_published_openapi_document_is_the_apps() -> None:
    from payops.deployments.console.api import CONTRACT, contract

    committed = json.loads(CONTRACT.read_text(encoding="utf-8"))
    assert committed == json.loads(json.dumps(contract())), (
        "the API changed: run `python -m payops.deployments.console.api` and commit openapi.json"
    )


def console_session(url: str, name: str) -> tuple[httpx.Client, str]:
    """A console login of ``name``: the client and its session's CSRF token."""
    import re

    client = httpx.Client(base_url=url, timeout=60)
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    form = {"username": name, "password": PASSWORD, "csrf_token": token}
    assert client.post("/login", data=form).status_code == 303
    page = client.get("/runs").text
    return client, re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def test_cli_console_and_api_give_the_same_signed_decision_and_races_answer_409(
    server: dict[str, Any], tmp_path: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import jwt
    from payops.store.approvals import Approvals
    from payops.tasks.approval.approval_keys import load_verify_key

    state = server["state"]
    state.users.add("dan", "approver", PASSWORD)
    server["tokens"]["dan"] = state.users.issue_token("dan", "tests")
    state_policy(state.engine, "0:3")
    sheet = good_sheet(tmp_path / "three.xlsx", n=2, prefix="TRI")
    before = payouts_at(server["emulator"])
    with api(server, "olu") as olu:
        with sheet.open("rb") as fh:
            files, options = {"sheet": ("three.xlsx", fh)}, {"options": '{"label": "fd-3"}'}
            started = olu.post("/runs", files=files, data=options)
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    with api(server, "bea") as bea:
        deadline = time.monotonic() + 120
        while not bea.get(f"/runs/{run_id}").json()["paused"]:
            assert time.monotonic() < deadline, "the run never paused"
            time.sleep(0.5)
    ack = ["--acknowledge", "no_name_column", "--acknowledge", "paid_before"]  # paid before: issue 47
    by_cli = payops(bare_env(server, "dan", tmp_path / "dan"), "approve", "fd-3", *ack)
    assert by_cli.returncode == 0 and "2 more approvals needed" in by_cli.stdout, by_cli.stderr
    console, csrf = console_session(server["url"], "bea")
    form = {"csrf_token": csrf, "decision": "approve", "acknowledge": ["no_name_column", "paid_before"]}
    assert console.post(f"/runs/{run_id}/approval", data=form).status_code == 303
    assert payouts_at(server["emulator"]) == before

    def by_api(_: int) -> int:
        with api(server, "cat") as cat:
            body = {"decision": "approve", "acknowledge": ["no_name_column", "paid_before"]}
            return cat.post(f"/runs/{run_id}/approval", json=body).status_code

    with ThreadPoolExecutor(4) as pool:
        codes = sorted(pool.map(by_api, range(4)))
    assert codes == [200, 409, 409, 409], codes
    console.close()

    key = load_verify_key(state.settings)
    decisions = Approvals(state.engine).decisions(run_id)
    claims = [jwt.decode(d.token, key, algorithms=["EdDSA"]) for d in decisions]
    assert sorted(c.pop("approver") for c in claims) == ["bea", "cat", "dan"]
    assert claims[0] == claims[1] == claims[2]  # one subject, signed alike whichever channel carried it
    with api(server, "bea") as bea:
        deadline = time.monotonic() + 120
        while not (run := bea.get(f"/runs/{run_id}").json())["final"]:
            assert time.monotonic() < deadline, "the run never ended"
            time.sleep(0.5)
    assert run["summary"]["approval"]["approvers"] == ["dan", "bea", "cat"]
    assert payouts_at(server["emulator"]) == before + 2


def test_admins_record_who_holds_prefects_login_on_the_console_and_through_the_api(
    server: dict[str, Any],
) -> None:
    users = server["state"].users
    console, csrf = console_session(server["url"], "ada")
    answer = console.post("/admin/users/bea/prefect-login", data={"csrf_token": csrf})
    assert answer.status_code == 303 and users.prefect_login_holders() == ["bea"]
    assert "holds it" in console.get("/admin/users").text
    console.close()
    with api(server, "ada") as ada:
        assert ada.post("/users/cat/prefect-login", json={"holds": True}).status_code == 200
        assert ada.post("/users/bea/prefect-login", json={"holds": False}).status_code == 200
    with api(server, "olu") as olu:
        assert olu.post("/users/olu/prefect-login", json={"holds": False}).status_code == 403
    assert users.prefect_login_holders() == ["cat"]
    assert [e.action for e in audited(server, "ada", "user.prefect_login")] == [
        "payops.user.prefect_login_revoked",
        "payops.user.prefect_login_granted",
        "payops.user.prefect_login_granted",
    ]


def test_a_sheet_is_checked_on_the_server_as_the_flow_reads_it(
    server: dict[str, Any], tmp_path: Path
) -> None:
    bad = bad_sheet(tmp_path / "bad.xlsx").read_bytes()
    with api(server, "olu") as olu:
        checked = olu.post("/sheets/check", files={"sheet": ("bad.xlsx", bad)}).json()
    assert checked["outcome"] == "invalid_input" and checked["rows_invalid"] == 2
    assert {(e["row"], e["column"]) for e in checked["errors"]} == {(3, "amount"), (4, "provider")}
    with api(server, "bea") as bea:
        assert bea.post("/sheets/check", files={"sheet": ("bad.xlsx", bad)}).status_code == 403
