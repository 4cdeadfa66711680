"""Users, sessions, API tokens, the approval policy and the keyed audit chain on a freshly migrated SQLite
and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from payops.store import migrate, open_engine
from payops.store.approvals import DEFAULT_POLICY, Approvals, parse_policy
from payops.store.audit import GENESIS, append, entry_hash, search, verify
from payops.store.users import UserError, Users
from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher
from sqlalchemy import Engine, inspect, text

KEY = b"test-audit-key-0123456789"

PW = "a long enough password"
FAST = PasswordHash((Argon2Hasher(time_cost=1, memory_cost=1024),))  # the real rule, cheaper parameters
TABLES = {
    "users",
    "sessions",
    "api_tokens",
    "approval_tiers",
    "approval_requests",
    "approval_rows",
    "notices",
    "run_decisions",
    "audit_log",
}


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


def test_approval_policy_per_currency(engine: Engine) -> None:
    policy = parse_policy("GHS 1000:1, 100000:2; USD 100:1; 0:0")
    cases = [
        ({"GHS": "999.99"}, 0),
        ({"GHS": "1000"}, 1),
        ({"GHS": "100000.00"}, 2),
        ({"USD": "100"}, 1),
        ({"EUR": "1e9"}, 0),  # the group without a currency: every other currency
        ({"GHS": "1000", "USD": "99"}, 1),  # the most any currency asks
        ({"GHS": "5", "USD": "5000"}, 1),
    ]
    for totals, need in cases:
        assert policy.required({c: Decimal(t) for c, t in totals.items()}) == need, totals
    assert parse_policy(policy.to_text()) == policy
    # amounts as the console writes them: a comma inside an amount is a thousands separator
    assert parse_policy("GHS 1,000:1, 100,000:2; USD 100:1; 0:0") == policy
    assert parse_policy("0:1,100:2").to_text() == "0.00:1, 100.00:2"  # here the comma ends a tier
    with pytest.raises(UserError, match="tier 'ten:2'"):
        parse_policy("ten:2")
    with pytest.raises(UserError, match="approvers 0..5"):
        parse_policy("100:9")
    with pytest.raises(UserError, match="GHS: listed twice"):
        parse_policy("GHS 0:1; GHS 10:2")
    approvals = Approvals(engine)
    assert approvals.policy() == DEFAULT_POLICY  # a new install: every run needs one approver
    assert approvals.policy().required({"GHS": Decimal("0.01")}) == 1
    approvals.set_policy(policy)
    assert approvals.policy() == policy
    approvals.set_policy(parse_policy("none"))
    assert approvals.policy().needs_none and "set by an admin" in approvals.policy().describe()


def test_a_decision_raced_by_the_same_user_is_refused_cleanly(engine: Engine) -> None:
    """Six concurrent approvals by one approver: one is kept, the others are a UserError (409 upstream),
    never a database error."""
    from concurrent.futures import ThreadPoolExecutor

    approvals = Approvals(engine)

    def once(_: int) -> str:
        try:
            approvals.decide("run-1", "bea", "approve", "", "token")
        except UserError as exc:
            return str(exc)
        return "ok"

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(once, range(6)))
    assert answers.count("ok") == 1, answers
    assert all("already decided" in a for a in answers if a != "ok")
    assert len(approvals.decisions("run-1")) == 1


def test_api_tokens_authenticate_until_revoked_or_the_user_is_disabled(engine: Engine) -> None:
    users = Users(engine, FAST)
    users.add("olu", "operator", PW)
    token = users.issue_token("olu", "laptop")
    assert token.startswith("pyo_") and users.authenticate_token(token).name == "olu"
    assert users.authenticate_token(token[:-1] + "x") is None and users.authenticate_token("nope") is None
    [info] = users.tokens("olu")
    assert info.name == "laptop" and info.last_used_at is not None and token not in repr(info)
    users.set_disabled("olu", True)
    assert users.authenticate_token(token) is None
    users.set_disabled("olu", False)
    assert users.authenticate_token(token).name == "olu"
    users.revoke_token(info.id)
    assert users.authenticate_token(token) is None and users.tokens()[0].revoked


def test_who_holds_prefects_login_is_recorded_and_listed_disabled_or_not(engine: Engine) -> None:
    """Runs started outside payops exclude these users from approving (tasks/approval/approval_gate.py)."""
    users = Users(engine, FAST)
    for name in ("bea", "cat", "hal"):
        users.add(name, "approver", PW)
    assert users.prefect_login_holders() == []
    users.set_prefect_login("hal", True)
    users.set_prefect_login("cat", True)
    users.set_disabled("hal", True)  # disabled, hal still knows the login
    assert users.prefect_login_holders() == ["cat", "hal"]
    users.set_prefect_login("cat", False)
    assert users.prefect_login_holders() == ["hal"]
    with pytest.raises(UserError, match="no user named 'nobody'"):
        users.set_prefect_login("nobody", True)


def test_users_from_before_0008_hold_no_prefect_login(tmp_path: Path) -> None:
    """The migration adds ``users.prefect_login`` false for every existing user."""
    from alembic import command
    from alembic.config import Config
    from payops.store.database import MIGRATIONS

    engine = open_engine(f"sqlite:///{tmp_path / 'old.sqlite3'}")
    try:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0007_retry_rows")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO users (name, role, password_hash, disabled, created_at) "
                    "VALUES ('old', 'approver', 'x', 0, '2026-01-01 00:00:00')"
                )
            )
        migrate(engine)
        assert "prefect_login" in {c["name"] for c in inspect(engine).get_columns("users")}
        assert Users(engine, FAST).prefect_login_holders() == []
        Users(engine, FAST).set_prefect_login("old", True)
        assert Users(engine, FAST).prefect_login_holders() == ["old"]
    finally:
        engine.dispose()


class CountingHasher:
    """FAST, counting its hashes and verifications."""

    def __init__(self) -> None:
        self.hashes = self.verifies = 0

    def hash(self, password: str) -> str:
        self.hashes += 1
        return FAST.hash(password)

    def verify(self, password: str, hashed: str) -> bool:
        self.verifies += 1
        return FAST.verify(password, hashed)

    def verify_and_update(self, password: str, hashed: str) -> tuple[bool, str | None]:
        self.verifies += 1
        return FAST.verify_and_update(password, hashed)


def test_a_token_sign_in_hashes_nothing_and_unknown_names_cost_what_known_ones_do(engine: Engine) -> None:
    Users(engine, FAST).add("olu", "operator", PW)
    token = Users(engine, FAST).issue_token("olu", "laptop")
    counted = CountingHasher()
    users = Users(engine, counted)  # a CLI command signed in by its API token
    assert users.authenticate_token(token).name == "olu"
    assert counted.hashes == counted.verifies == 0
    for name in ("nobody", "olu"):  # either order: the decoy is made before the look-up
        counted = CountingHasher()
        users = Users(engine, counted)
        users.authenticate(name, "wrong password 123")
        assert (counted.hashes, counted.verifies) == (1, 1), name


def test_audit_chain_reports_an_edited_or_deleted_row(engine: Engine) -> None:
    for i in range(5):
        detail = {"i": i}
        append(engine, "alice", "payops.login", f"user:alice#{i}", client="10.0.0.1", detail=detail, key=KEY)
    assert verify(engine, key=KEY).ok and verify(engine, key=KEY).entries == 5
    assert [e.seq for e in search(engine, actor="alice", action="payops.login")] == [5, 4, 3, 2, 1]
    with engine.begin() as conn:
        conn.execute(text("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2"))
    verdict = verify(engine, key=KEY)
    assert not verdict.ok and verdict.problems == [
        "entry 2: its content does not match its keyed hash (edited)"
    ]
    with engine.begin() as conn:
        conn.execute(text("UPDATE audit_log SET actor = 'alice' WHERE seq = 2"))
        conn.execute(text("DELETE FROM audit_log WHERE seq = 4"))
    problems = verify(engine, key=KEY).problems
    assert "entries 4..4 are missing (deleted)" in problems
    assert "entry 5: does not follow the entry before it (edited or deleted)" in problems


@pytest.mark.e2e
def test_migration_and_audit_chain_on_postgresql() -> None:
    from payops.deployments.scaleout.postgres import PrivatePostgres

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
                append(engine, "alice", "payops.user.added", f"user:u{i}", key=KEY)
            assert verify(engine, key=KEY).ok and verify(engine, key=KEY).entries == 3
            Approvals(engine).set_policy(parse_policy("100:1,1000:2"))
            assert Approvals(engine).policy().required({"GHS": Decimal("1000.00")}) == 2
        finally:
            engine.dispose()


def test_an_edit_re_chained_with_the_public_rule_is_detected(engine: Engine) -> None:
    """Who can write the database but not read the audit key cannot rewrite history: an edited entry with
    every later hash recomputed (unkeyed SHA-256, or HMAC under a guessed key) still fails verification."""
    import hashlib
    import json

    for i in range(4):
        append(engine, "alice", "payops.run.approved", f"run:{i}", detail={"total": "10.00"}, key=KEY)
    assert verify(engine, key=KEY).ok

    def rechain(hash_of) -> None:  # noqa: ANN001
        with engine.begin() as conn:
            rows = conn.execute(
                text("SELECT seq, at, actor, client, action, object, detail FROM audit_log ORDER BY seq")
            ).all()
            prev = GENESIS
            for seq, at, actor, client, action, obj, detail in rows:
                actor = "mallory" if seq == 2 else actor
                at = at if not isinstance(at, str) else __import__("datetime").datetime.fromisoformat(at)
                body = json.dumps(
                    [seq, at.isoformat(), actor, client, action, obj, detail], ensure_ascii=False
                )
                digest = hash_of(prev, body)
                conn.execute(
                    text("UPDATE audit_log SET actor = :a, prev_hash = :p, hash = :h WHERE seq = :s"),
                    {"a": actor, "p": prev, "h": digest, "s": seq},
                )
                prev = digest

    rechain(lambda prev, body: hashlib.sha256((prev + body).encode()).hexdigest())
    problems = verify(engine, key=KEY).problems
    assert problems and all("keyed hash" in p for p in problems), problems
    rechain(
        lambda prev, body: (
            __import__("hmac").new(b"guessed-key-000000", (prev + body).encode(), "sha256").hexdigest()
        )
    )
    assert not verify(engine, key=KEY).ok


def test_verify_compares_the_outside_copies(engine: Engine) -> None:
    entries = [append(engine, "alice", "payops.login", "user:alice", key=KEY) for _ in range(3)]
    copies = [(e.seq, e.hash) for e in entries]
    assert verify(engine, copies, key=KEY).ok
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_log WHERE seq = 3"))  # the newest entry: the chain alone is fine
    assert verify(engine, key=KEY).ok
    assert verify(engine, copies, key=KEY).problems == [
        "entry 3: in the Prefect events but not in the database (deleted)"
    ]
    forged = [(1, entry_hash(b"k" * 20, GENESIS, 1, entries[0].at, "x", "", "a", "o", "{}"))]
    problems = verify(engine, forged, key=KEY).problems
    assert "entry 1: differs from its copy in the Prefect events (edited)" in problems
