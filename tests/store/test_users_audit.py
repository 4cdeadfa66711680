"""Users, sessions, approval rules and the audit chain on a freshly migrated SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher
from sqlalchemy import Engine, inspect, text

from store import migrate, open_engine
from store.approvals import Approvals, parse_tiers
from store.audit import append, search, verify
from store.users import UserError, Users

PW = "a long enough password"
FAST = PasswordHash((Argon2Hasher(time_cost=1, memory_cost=1024),))  # the real rule, cheaper parameters
TABLES = {"users", "sessions", "approval_tiers", "payout_runs", "run_decisions", "audit_log"}


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = open_engine(f"sqlite:///{tmp_path / 'p.sqlite3'}")
    migrate(engine)
    yield engine
    engine.dispose()


def test_migration_creates_the_tables_on_an_empty_sqlite(engine: Engine) -> None:
    assert TABLES <= set(inspect(engine).get_table_names())


def test_clear_messages_for_bad_user_input(engine: Engine) -> None:
    users = Users(engine, FAST)
    users.add("alice", "operator", PW)
    with pytest.raises(UserError, match="already exists"):
        users.add("alice", "approver", PW)
    with pytest.raises(UserError, match="password too weak: at least 12 characters"):
        users.add("bob", "approver", "short")
    with pytest.raises(UserError, match="not containing the user name"):
        users.add("bobby", "approver", "bobby-is-my-password")
    with pytest.raises(UserError, match="role 'boss' is not one of operator, approver, admin"):
        users.add("bob", "boss", PW)
    with pytest.raises(UserError, match="user name 'Bob Smith' is not allowed"):
        users.add("Bob Smith", "operator", PW)
    with pytest.raises(UserError, match="no user named 'carol'"):
        users.set_disabled("carol")
    with pytest.raises(UserError, match="no user named 'carol'"):
        users.reset_password("carol", PW)


def test_passwords_are_argon2_and_sessions_end_on_logout_disable_reset(engine: Engine) -> None:
    users = Users(engine, FAST)
    alice = users.add("alice", "operator", PW)
    assert alice.password_hash.startswith("$argon2id$") and PW not in alice.password_hash
    assert users.authenticate("alice", "wrong password!") is None
    assert users.authenticate("nobody", PW) is None
    user = users.authenticate("alice", PW)
    assert user is not None and user.name == "alice"

    token = users.start_session(user, "10.0.0.1")
    account = users.resolve(token, 600, 3600)
    assert account is not None and account.name == "alice" and account.role == "operator"
    with engine.connect() as conn:  # only the hash of the session id is stored
        assert token not in str(conn.execute(text("SELECT * FROM sessions")).all())
    users.end_session(token)
    assert users.resolve(token, 600, 3600) is None

    token = users.start_session(user, "10.0.0.1")
    users.set_disabled("alice")
    assert users.resolve(token, 600, 3600) is None and users.authenticate("alice", PW) is None
    users.set_disabled("alice", False)

    token = users.start_session(user, "10.0.0.1")
    users.reset_password("alice", "another long password")
    assert users.resolve(token, 600, 3600) is None
    assert users.authenticate("alice", PW) is None and users.authenticate("alice", "another long password")


def test_idle_and_absolute_timeouts(engine: Engine) -> None:
    users = Users(engine, FAST)
    user = users.add("alice", "operator", PW)
    token = users.start_session(user, "")
    time.sleep(1.1)
    assert users.resolve(token, idle_s=1, absolute_s=3600) is None
    token = users.start_session(user, "")
    time.sleep(1.1)
    assert users.resolve(token, idle_s=600, absolute_s=1) is None
    assert users.resolve("made-up", 600, 3600) is None and users.resolve("x" * 10_000, 600, 3600) is None


def test_approval_tiers(engine: Engine) -> None:
    rule = parse_tiers("1000:1, 10000:2, 0:0")
    assert [rule.required(Decimal(x)) for x in ("999.99", "1000", "9999.99", "10000", "1e9")] == [
        0,
        1,
        1,
        2,
        2,
    ]
    with pytest.raises(UserError, match="tier 'ten:2'"):
        parse_tiers("ten:2")
    with pytest.raises(UserError, match="approvers 0..5"):
        parse_tiers("100:9")
    approvals = Approvals(engine)
    approvals.set_rule(rule)
    assert approvals.rule() == rule


def test_audit_chain_reports_an_edited_or_deleted_row(engine: Engine) -> None:
    for i in range(5):
        append(engine, "alice", "payops.login", f"user:alice#{i}", client="10.0.0.1", detail={"i": i})
    assert verify(engine).ok and verify(engine).entries == 5
    assert [e.seq for e in search(engine, actor="alice", action="payops.login")] == [5, 4, 3, 2, 1]
    with engine.begin() as conn:
        conn.execute(text("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2"))
    verdict = verify(engine)
    assert not verdict.ok and verdict.problems == ["entry 2: its content does not match its hash (edited)"]
    with engine.begin() as conn:
        conn.execute(text("UPDATE audit_log SET actor = 'alice' WHERE seq = 2"))
        conn.execute(text("DELETE FROM audit_log WHERE seq = 4"))
    problems = verify(engine).problems
    assert "entries 4..4 are missing (deleted)" in problems
    assert "entry 5: does not follow the entry before it (edited or deleted)" in problems


@pytest.mark.e2e
def test_migration_and_audit_chain_on_postgresql() -> None:
    from deployments.scaleout.postgres import PrivatePostgres
    from tests.deployments.console_harness import free_port

    with PrivatePostgres(free_port()) as pg:
        engine = open_engine(pg.url.replace("+asyncpg", "+psycopg"))
        try:
            migrate(engine)
            migrate(engine)
            assert TABLES <= set(inspect(engine).get_table_names())
            users = Users(engine, FAST)
            user = users.add("alice", "admin", PW)
            assert users.resolve(users.start_session(user, "::1"), 60, 60).name == "alice"
            for i in range(3):
                append(engine, "alice", "payops.user.added", f"user:u{i}")
            assert verify(engine).ok and verify(engine).entries == 3
            Approvals(engine).set_rule(parse_tiers("100:1,1000:2"))
            assert Approvals(engine).rule().required(Decimal("1000.00")) == 2
        finally:
            engine.dispose()
