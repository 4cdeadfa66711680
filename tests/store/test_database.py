"""The payops database room: where it lives, and that migrations bring an empty database up to date."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from store import database_url, migrate, open_engine, payops_home


def test_default_database_is_a_sqlite_file_under_the_payops_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PAYOPS_DATABASE_URL", raising=False)
    assert payops_home() == tmp_path / "home"
    assert (tmp_path / "home").stat().st_mode & 0o777 == 0o700
    assert database_url() == f"sqlite:///{tmp_path / 'home' / 'payops.sqlite3'}"


def test_a_configured_url_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAYOPS_DATABASE_URL", "postgresql+psycopg://u:p@127.0.0.1:5432/payops")
    assert database_url() == "postgresql+psycopg://u:p@127.0.0.1:5432/payops"


def test_migrate_runs_on_an_empty_sqlite_file_and_twice(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'p.sqlite3'}")
    try:
        migrate(engine)
        migrate(engine)  # idempotent: every start may call it
        assert "alembic_version" in inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    finally:
        engine.dispose()


def test_schema_heads_are_the_newest_migrations_alembic_finds() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from store.database import MIGRATIONS, SCHEMA_HEADS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert SCHEMA_HEADS == frozenset(ScriptDirectory.from_config(config).get_heads())


def test_a_database_behind_the_newest_revision_is_migrated(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    from store.database import MIGRATIONS, SCHEMA_HEADS, recorded_revisions

    engine = open_engine(f"sqlite:///{tmp_path / 'p.sqlite3'}")
    try:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0003_lookup_cache")
        assert recorded_revisions(engine) == {"0003_lookup_cache"}
        assert "webhook_inbox" not in inspect(engine).get_table_names()
        migrate(engine)  # the fast path must not take a database that is behind for one that is current
        assert recorded_revisions(engine) == SCHEMA_HEADS
        assert "webhook_inbox" in inspect(engine).get_table_names()
    finally:
        engine.dispose()
