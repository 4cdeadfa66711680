"""`payops users|audit|approvals|approve` through the payops server (Typer's runner as the CLI, the console
app on 127.0.0.1 as the server): clear messages, roles checked on the server, sessions, the tamper check; the
host commands (`payops host ...`) and the first admin of `payops serve`."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from payops.deployments.cli import app
from payops.deployments.processes import ROOT
from payops.deployments.serve import approval_key, ensure_first_admin
from payops.store import PayopsSettings, upgrade_database
from payops.store.approvals import Approvals
from payops.store.audit import search
from payops.store.home import ServeRecord, write_serve_record
from payops.store.users import Users
from payops.tasks.approval.approval_keys import SIGNING_KEY_FILE, VERIFY_KEY_FILE, ensure_key_pair
from sqlalchemy import text
from typer.testing import CliRunner

from tests.deployments.console_harness import serve_in_thread

PW = "a long enough password"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PAYOPS_DATABASE_URL", f"sqlite:///{tmp_path / 'payops.sqlite3'}")
    monkeypatch.setenv("PAYOPS_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("PAYOPS_API_TOKEN", raising=False)
    return tmp_path / "home"


@pytest.fixture
def server(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The server (the console app, local mode) on this test's database, with an admin ``ada``; the CLI
    knows it by PAYOPS_URL and acts as ada by her token."""
    from payops.deployments.console import ConsoleSettings, LocalLauncher, create_app

    settings = ConsoleSettings(
        database_url=f"sqlite:///{tmp_path / 'payops.sqlite3'}",
        upload_url=str(tmp_path / "uploads"),
        report_url=str(tmp_path / "reports"),
    )
    ensure_key_pair(home)  # the server's key pair, as `payops serve` keeps it in the home
    app_ = create_app(settings, launcher=LocalLauncher())
    users = app_.state.console.users
    users.add("ada", "admin", PW)
    with serve_in_thread(app_) as url:
        monkeypatch.setenv("PAYOPS_URL", url)
        monkeypatch.setenv("PAYOPS_API_TOKEN", users.issue_token("ada", "tests"))
        yield {"url": url, "users": users, "engine": app_.state.console.engine}


def payops(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), input=stdin)
    return result.exit_code, result.output


def test_users_commands_with_clear_messages(server: dict[str, Any]) -> None:
    assert payops("users", "add", "ann", "--role", "approver", stdin=PW + "\n") == (
        0,
        "user ann added (approver)\n",
    )
    code, out = payops("users", "add", "ann", "--role", "operator", stdin=PW + "\n")
    assert code == 2 and "error: a user named 'ann' already exists" in out
    code, out = payops("users", "add", "bob", "--role", "operator", stdin="secret\n")
    assert (
        code == 2 and "error: password too weak: at least 12 characters, not containing the user name" in out
    )
    code, out = payops("users", "add", "bob", "--role", "boss", stdin=PW + "\n")
    assert code == 2 and "role 'boss' is not one of operator, approver, admin" in out
    for command in (["disable", "nobody"], ["reset-password", "nobody"]):
        code, out = payops("users", *command, stdin=PW + "\n")
        assert code == 2 and "error: no user named 'nobody'" in out
    code, out = payops("users", "list")
    assert code == 0 and out.split()[:3] == ["ada", "admin", "active"]
    users = server["users"]
    token = users.start_session(users.authenticate("ann", PW), "")
    assert payops("users", "disable", "ann")[0] == 0
    assert users.resolve(token, 600, 3600) is None and users.authenticate("ann", PW) is None
    assert payops("users", "enable", "ann")[0] == 0
    token = users.start_session(users.authenticate("ann", PW), "")
    assert payops("users", "reset-password", "ann", stdin="another long password\n")[0] == 0
    assert users.resolve(token, 600, 3600) is None and users.authenticate("ann", "another long password")
    code, out = payops("users", "prefect-login", "ann")
    assert code == 0 and "ann holds Prefect's login" in out
    assert "holds Prefect's login" in payops("users", "list")[1]
    entries = search(server["engine"], action="payops.user", limit=10)
    assert {e.actor for e in entries} == {"ada"}  # the authenticated user, whatever the shell says


def test_users_tokens_through_the_server(server: dict[str, Any]) -> None:
    assert payops("users", "add", "olu", "--role", "operator", stdin=PW + "\n")[0] == 0
    code, out = payops("users", "token", "olu", "--name", "laptop")
    token = out.splitlines()[0]
    assert code == 0 and token.startswith("pyo_") and server["users"].authenticate_token(token).name == "olu"
    code, out = payops("users", "tokens", "olu")
    assert code == 0 and "laptop" in out and "active" in out and token not in out
    token_id = out.split()[0]
    assert payops("users", "revoke-token", token_id)[0] == 0
    assert server["users"].authenticate_token(token) is None


def test_an_operator_token_cannot_administer(server: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    server["users"].add("olu", "operator", PW)
    monkeypatch.setenv("PAYOPS_API_TOKEN", server["users"].issue_token("olu", "tests"))
    monkeypatch.setenv("LOGNAME", "ada")  # the shell's claims count for nothing
    for command in (
        ["users", "add", "mal", "--role", "approver"],
        ["users", "token", "ada"],
        ["users", "disable", "ada"],
        ["approvals", "policy", "--set", "none"],
        ["audit", "list"],
    ):
        code, out = payops(*command, stdin=PW + "\n")
        assert code == 2 and out.strip() == "error: olu is operator; this needs the role admin", command
    assert len(search(server["engine"], actor="olu", action="payops.access.denied", limit=10)) == 5
    assert {u.name for u in server["users"].all()} == {"ada", "olu"}


def test_audit_verify_reports_a_tampered_row(server: dict[str, Any]) -> None:
    for name in ("ann", "bob", "cat"):
        assert payops("users", "add", name, "--role", "approver", stdin=PW + "\n")[0] == 0
    code, out = payops("audit", "verify")
    assert code == 0 and out.startswith("audit trail intact: 3 entries"), out
    code, out = payops("audit", "list", "--action", "payops.user")
    assert code == 0 and len(out.splitlines()) == 3 and "user:bob" in out and "\tada\t" in out
    with server["engine"].begin() as conn:
        conn.execute(text("UPDATE audit_log SET object = 'user:mallory' WHERE seq = 2"))
    code, out = payops("audit", "verify")
    assert (
        code == 1 and "audit trail broken: entry 2: its content does not match its keyed hash (edited)" in out
    )


def test_approve_asks_for_the_users_credentials(prefect_harness: None, server: dict[str, Any]) -> None:
    server["users"].add("olu", "operator", PW)
    run_id = str(uuid4())
    code, out = payops("approve", run_id, "--user", "olu", stdin="wrong password\n")
    assert code == 2 and "error: wrong user name or password" in out
    code, out = payops("approve", run_id, "--user", "olu", stdin=PW + "\n")
    assert code == 2 and "error: olu is operator; this needs the role approver" in out
    server["users"].add("bea", "approver", PW)
    code, out = payops("approve", run_id, "--user", "bea", stdin=PW + "\n")
    assert code == 2 and "error: This run is not waiting for approval." in out
    code, out = payops("approve", "not-a-run", "--user", "bea", stdin=PW + "\n")
    assert code == 2 and "no payout run with name, label or id 'not-a-run'" in out
    assert search(server["engine"], actor="olu", action="payops.access.denied", limit=5)


def test_without_a_server_person_commands_refuse_in_one_line(home: Path) -> None:
    for command in (["users", "add", "ann", "--role", "admin"], ["approve", "x"], ["approvals", "policy"]):
        code, out = payops(*command, stdin=PW + "\n")
        assert code == 2 and out.startswith("error: no payops server known: set PAYOPS_URL"), out
    assert "payops host create-admin NAME" in payops("users", "add", "ann", "--role", "admin")[1]


def test_the_cli_finds_the_server_of_its_home_by_serves_record(
    server: dict[str, Any], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAYOPS_URL")
    home.mkdir(parents=True, exist_ok=True)
    record = ServeRecord(pid=os.getpid(), prefect_api_url="http://unused/api", console_url=server["url"])
    write_serve_record(record, home)
    code, out = payops("users", "list")
    assert code == 0 and out.startswith("ada"), out


def test_host_commands_need_the_home_and_are_audited_as_the_host_account(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("LOGNAME", "someone-else")
    code, out = payops("host", "create-admin", "ada", stdin=PW + "\n")
    assert code == 0 and f"admin ada created locally, audited as host:{os.getuid()}" in out
    code, out = payops("host", "policy", "--set", "GHS 0:2")
    assert code == 0 and "approval policy set locally" in out
    engine = upgrade_database(PayopsSettings.from_env())
    host = f"host:{os.getuid()}"
    actors = {(e.actor, e.action) for e in search(engine, limit=10)}
    assert actors == {(host, "payops.user.added"), (host, "payops.rules.changed")}
    refused = as_another_account(["host", "policy", "--set", "none"], home)
    assert refused.returncode == 1 and "needs write access to the payops home" in refused.stderr
    assert Approvals(engine).policy().describe().startswith("GHS")  # unchanged


def as_another_account(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """``payops ARGS`` as an account that cannot write ``home`` (nobody, when this test runs as root)."""
    env = {**os.environ, "PAYOPS_HOME": str(home)}
    command = [sys.executable, "-m", "payops.deployments.cli", *args]
    if os.getuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
        env["HOME"] = "/tmp"
    else:
        home.chmod(0o500)
    try:
        return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    finally:
        home.chmod(0o700)


def test_serve_creates_the_first_admin_once_in_a_0600_file(home: Path) -> None:
    home.mkdir(parents=True)
    said: list[str] = []
    path = ensure_first_admin(PayopsSettings.from_env(), said.append)
    assert path is not None and stat.S_IMODE(path.stat().st_mode) == 0o600
    password = path.read_text().strip()
    assert said[0].startswith("approval policy: every currency: from 0.00: 1 approver")  # the safe default
    assert password not in said[1] and str(path) in said[1]
    engine = upgrade_database(PayopsSettings.from_env())
    assert Users(engine).authenticate("admin", password).role == "admin"
    engine.dispose()
    assert ensure_first_admin(PayopsSettings.from_env(), said.append) is None
    assert len(said) == 3 and said[2] == said[0]


def test_serve_keeps_the_approval_key_pair_in_the_home_and_none_in_the_environment(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`payops serve` makes the pair once; the console and the flows it serves find the files in the home,
    so no key material goes into the environment its children inherit."""
    before = dict(os.environ)
    verify = approval_key(PayopsSettings.from_env())
    assert verify == str(home / VERIFY_KEY_FILE) and (home / SIGNING_KEY_FILE).stat().st_mode & 0o777 == 0o600
    private = (home / SIGNING_KEY_FILE).read_bytes()
    assert approval_key(PayopsSettings.from_env()) == verify  # made once
    assert (home / SIGNING_KEY_FILE).read_bytes() == private
    assert dict(os.environ) == before
    assert not [v for v in os.environ.values() if "PRIVATE KEY" in v or "PUBLIC KEY" in v]
    own = tmp_path / "own-signing-key.pem"  # the server's key configured elsewhere: nothing made here
    monkeypatch.setenv("PAYOPS_APPROVAL_SIGNING_KEY_FILE", str(own))
    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "other-home"))
    assert approval_key(PayopsSettings.from_env()) is None
    assert not (tmp_path / "other-home" / SIGNING_KEY_FILE).exists()
