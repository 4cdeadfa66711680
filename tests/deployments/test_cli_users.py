"""`payops users|audit|approve` in process (Typer's runner): clear messages, sessions, the tamper check, and
the first admin of `payops serve`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from uuid import uuid4

import pytest
from payops.deployments.cli import app
from payops.deployments.serve import ensure_first_admin
from payops.store import PayopsSettings, upgrade_database
from payops.store.home import ServeRecord, write_serve_record
from payops.store.users import Users
from payops.tasks.approval.approvals import load_approval_key
from sqlalchemy import text
from typer.testing import CliRunner

PW = "a long enough password"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PAYOPS_DATABASE_URL", f"sqlite:///{tmp_path / 'payops.sqlite3'}")
    return tmp_path / "home"


def payops(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), input=stdin)
    return result.exit_code, result.output


def test_users_commands_with_clear_messages(home: Path) -> None:
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
    assert code == 0 and out.split()[:3] == ["ann", "approver", "active"]
    engine = upgrade_database(PayopsSettings.from_env())
    users = Users(engine)
    token = users.start_session(users.authenticate("ann", PW), "")
    assert payops("users", "disable", "ann")[0] == 0
    assert users.resolve(token, 600, 3600) is None and users.authenticate("ann", PW) is None
    assert payops("users", "enable", "ann")[0] == 0
    token = users.start_session(users.authenticate("ann", PW), "")
    assert payops("users", "reset-password", "ann", stdin="another long password\n")[0] == 0
    assert users.resolve(token, 600, 3600) is None and users.authenticate("ann", "another long password")
    engine.dispose()


def test_audit_verify_reports_a_tampered_row(home: Path) -> None:
    for name in ("ann", "bob", "cat"):
        assert payops("users", "add", name, "--role", "approver", stdin=PW + "\n")[0] == 0
    code, out = payops("audit", "verify")
    assert code == 0 and "audit trail intact: 3 entries" in out
    code, out = payops("audit", "list", "--action", "payops.user")
    assert code == 0 and len(out.splitlines()) == 3 and "user:bob" in out
    engine = upgrade_database(PayopsSettings.from_env())
    with engine.begin() as conn:
        conn.execute(text("UPDATE audit_log SET object = 'user:mallory' WHERE seq = 2"))
    engine.dispose()
    code, out = payops("audit", "verify")
    assert (
        code == 1 and "audit trail broken: entry 2: its content does not match its keyed hash (edited)" in out
    )


def test_approve_asks_for_the_users_credentials(
    prefect_harness: None, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payops("users", "add", "olu", "--role", "operator", stdin=PW + "\n")
    run_id = str(uuid4())
    monkeypatch.setenv("PAYOPS_APPROVAL_KEY", "cli-users-test-approval-key-0123")
    code, out = payops("approve", run_id, "--user", "olu", stdin="wrong password\n")
    assert code == 2 and "error: wrong user name or password" in out
    code, out = payops("approve", run_id, "--user", "olu", stdin=PW + "\n")
    assert code == 2 and "error: Only approvers can approve or reject payout runs." in out
    code, out = payops("approve", "not-a-run", "--user", "olu", stdin=PW + "\n")
    assert code == 2 and "no payout run with name, label or id 'not-a-run'" in out
    assert "payops.approval.refused" in payops("audit", "list")[1]


def test_approve_without_a_key_says_so_before_asking_for_the_password(
    prefect_harness: None, home: Path
) -> None:
    payops("users", "add", "bea", "--role", "approver", stdin=PW + "\n")
    code, out = payops("approve", str(uuid4()), "--user", "bea", stdin="wrong password\n")
    assert code == 1 and "error: no approval signing key: set PAYOPS_APPROVAL_KEY" in out
    assert "wrong user name or password" not in out
    assert "login.failed" not in payops("audit", "list")[1]  # the password was never checked


def test_approve_finds_the_key_payops_serve_keeps_in_the_home(
    prefect_harness: None, home: Path, tmp_path: Path
) -> None:
    """Beside `payops serve` (its record in the home names its key file), no variable is needed."""
    home.mkdir(parents=True)
    key = tmp_path / "serve-key"
    key.write_text("a-key-payops-serve-keeps-0123456789\n")
    record = ServeRecord(pid=os.getpid(), prefect_api_url="http://unused/api", console_url="http://unused")
    write_serve_record(record.model_copy(update={"approval_key_file": str(key)}), home)
    assert asyncio.run(load_approval_key(PayopsSettings.from_env())) == b"a-key-payops-serve-keeps-0123456789"
    payops("users", "add", "bea", "--role", "approver", stdin=PW + "\n")
    code, out = payops("approve", str(uuid4()), "--user", "bea", stdin="wrong password\n")
    assert code == 2 and "wrong user name or password" in out


def test_serve_creates_the_first_admin_once_in_a_0600_file(home: Path) -> None:
    home.mkdir(parents=True)
    said: list[str] = []
    path = ensure_first_admin(PayopsSettings.from_env(), said.append)
    assert path is not None and path.stat().st_mode & 0o777 == 0o600
    password = path.read_text().strip()
    assert said[0].startswith("approval policy: every currency: from 0.00: 1 approver")  # the safe default
    assert password not in said[1] and str(path) in said[1]
    engine = upgrade_database(PayopsSettings.from_env())
    assert Users(engine).authenticate("admin", password).role == "admin"
    engine.dispose()
    assert ensure_first_admin(PayopsSettings.from_env(), said.append) is None
    assert len(said) == 3 and said[2] == said[0]
