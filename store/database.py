"""Where the payops database is, how to open it, and how to bring its schema up to date."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import DeclarativeBase

from store.home import payops_home

MIGRATIONS = Path(__file__).parent / "migrations"
#: The newest revision of every branch in ``migrations/versions`` (a test checks it against Alembic's own
#: reading of that folder). A database that records exactly these needs no migration, so a command skips
#: Alembic's import and script parsing (a cost every command would pay) when nothing is to be done.
SCHEMA_HEADS = frozenset({"0007_retry_rows"})


class Base(DeclarativeBase):
    """Every payops table. Each feature declares its tables in its own module of this package."""


def database_url() -> str:
    """``PAYOPS_DATABASE_URL`` (e.g. ``postgresql+psycopg://user:pw@host/db``), else a SQLite file at home."""
    return os.environ.get("PAYOPS_DATABASE_URL") or f"sqlite:///{payops_home() / 'payops.sqlite3'}"


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API connection
    # WAL lets readers run beside one writer (console + relay + CLI on one file); busy_timeout waits for the
    # writer instead of failing with "database is locked"; foreign keys are off in SQLite unless asked for.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def open_engine(url: str | None = None) -> Engine:
    """A new engine for ``url`` (default :func:`database_url`). The caller owns it and disposes of it."""
    url = url or database_url()
    engine = create_engine(url, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def upsert_insert(engine: Engine, table: Any) -> Any:
    """An INSERT on ``table`` with ``on_conflict_do_…`` (SQLite or PostgreSQL); ValueError for others.

    The dialect is imported here, not at the top: importing the PostgreSQL dialect is slow, and every command
    on the default SQLite file would pay for it."""
    name = engine.dialect.name
    if name == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)
    if name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    raise ValueError(f"payops' database supports SQLite and PostgreSQL, not {name}")


def recorded_revisions(engine: Engine) -> frozenset[str]:
    """The revisions the database records as applied (empty for a new database)."""
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT version_num FROM alembic_version")).scalars()
            return frozenset(rows)
    except (OperationalError, ProgrammingError):  # no alembic_version table yet: nothing applied
        return frozenset()


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (every branch head); safe to call on every start."""
    if recorded_revisions(engine) == SCHEMA_HEADS:
        return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            # Workers starting together would each create alembic_version and the tables (a unique-key
            # violation in pg_type for the loser): a transaction-level advisory lock lets one migrate at once.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7261001)")
        config.attributes["connection"] = connection
        command.upgrade(config, "heads")
