"""The payops database room: where it lives, that migrations bring an empty database up to date, and that
a process opens it once and migrates it only where it is asked to (`payops serve`, `payops db upgrade`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from payops.store import PayopsSettings, SchemaBehind, migrate, open_database, open_engine, upgrade_database
from sqlalchemy import inspect, text


def test_default_database_is_a_sqlite_file_under_the_payops_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYOPS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PAYOPS_DATABASE_URL", raising=False)
    settings = PayopsSettings.from_env()
    assert settings.home_dir() == tmp_path / "home"
    assert (tmp_path / "home").stat().st_mode & 0o777 == 0o700
    assert settings.database == f"sqlite:///{tmp_path / 'home' / 'payops.sqlite3'}"


def test_a_configured_url_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAYOPS_DATABASE_URL", "postgresql+psycopg://u:p@127.0.0.1:5432/payops")
    assert PayopsSettings.from_env().database == "postgresql+psycopg://u:p@127.0.0.1:5432/payops"


def _behind(url: str, revision: str = "0003_lookup_cache") -> None:
    """A database an earlier payops left at ``revision``."""
    from alembic import command
    from alembic.config import Config
    from payops.store.database import MIGRATIONS

    engine = open_engine(url)
    try:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def test_opening_the_store_twice_creates_one_engine_and_migrates_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every store of a process (console routes and relay, a flow's gate, cache and reconciliation) shares
    one engine; a new home's empty database is created at the newest revision once, by the first opener."""
    import alembic.command
    import payops.store.database as database

    upgrades, engines = [], []
    real_upgrade, real_open = alembic.command.upgrade, database.open_engine
    monkeypatch.setattr(
        alembic.command, "upgrade", lambda *a, **k: upgrades.append(a) or real_upgrade(*a, **k)
    )
    monkeypatch.setattr(database, "open_engine", lambda url: engines.append(url) or real_open(url))
    settings = PayopsSettings(home=tmp_path / "home", database_url=None)
    first = open_database(settings)
    second = open_database(PayopsSettings(home=tmp_path / "home", database_url=None))
    assert first is second
    assert len(engines) == 1 and len(upgrades) == 1
    assert upgrade_database(settings) is first and len(upgrades) == 1  # at the newest revision: nothing to do


def test_a_database_behind_is_refused_naming_it_and_the_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.sqlite3'}"
    _behind(url)
    settings = PayopsSettings(home=tmp_path, database_url=url)
    with pytest.raises(SchemaBehind) as refused:
        open_database(settings)
    assert str(refused.value) == (
        f"the payops database {url} is at revision 0003_lookup_cache, this payops needs "
        "0012_notice_recipients: run `payops db upgrade` (or `payops serve`, which upgrades it)"
    )
    with pytest.raises(SchemaBehind):  # still behind: refused again, never migrated behind the user's back
        open_database(settings)
    upgrade_database(settings)
    assert open_database(settings) is not None


def test_the_refusal_never_shows_a_password() -> None:
    behind = SchemaBehind("postgresql+psycopg://payops:s3cret@db.example:5432/payops", frozenset({"0001_x"}))
    assert "s3cret" not in str(behind) and "payops:***@db.example" in str(behind)


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
    from payops.store.database import MIGRATIONS, SCHEMA_HEADS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert SCHEMA_HEADS == frozenset(ScriptDirectory.from_config(config).get_heads())


def test_a_database_behind_the_newest_revision_is_migrated(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config
    from payops.store.database import MIGRATIONS, SCHEMA_HEADS, recorded_revisions

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


def test_a_new_sqlite_database_and_its_wal_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    import os

    from payops.store.database import DATABASE_FILE_MODE

    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)  # a home others may list, as `mkdir` makes one
    previous = os.umask(0o022)
    try:
        settings = PayopsSettings(home=home)
        engine = upgrade_database(settings)
        with engine.begin() as connection:  # a write: SQLite makes its -wal and -shm files
            connection.execute(text("CREATE TABLE IF NOT EXISTS probe (n INTEGER)"))
            connection.execute(text("INSERT INTO probe VALUES (1)"))
            modes = {
                name: (home / name).stat().st_mode & 0o777
                for name in ("payops.sqlite3", "payops.sqlite3-wal", "payops.sqlite3-shm")
            }
        engine.dispose()
    finally:
        os.umask(previous)
    assert modes == dict.fromkeys(modes, DATABASE_FILE_MODE) and DATABASE_FILE_MODE == 0o600


def test_an_existing_database_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    path.touch(mode=0o640)
    path.chmod(0o640)  # an admin's choice, e.g. a group of readers
    engine = open_engine(f"sqlite:///{path}")
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
    engine.dispose()
    assert path.stat().st_mode & 0o777 == 0o640


def test_in_memory_and_uri_databases_make_no_file(tmp_path: Path) -> None:
    from payops.store.database import sqlite_file
    from sqlalchemy.engine import make_url

    assert sqlite_file(make_url("sqlite://")) is None
    assert sqlite_file(make_url("sqlite:///:memory:")) is None
    assert sqlite_file(make_url(f"sqlite:///file:{tmp_path}/x.db?uri=true")) is None
    assert sqlite_file(make_url(f"sqlite:///{tmp_path}/x.db")) == tmp_path / "x.db"
