"""How to open the payops database, and who brings its schema up to date.

One engine per database URL per process (:func:`open_database`), its schema checked once. Only `payops serve`
and `payops db upgrade` migrate a database that is behind (:func:`upgrade_database`); every other entry
point refuses it with :class:`SchemaBehind` (one line naming the database, never its password, and the
command to run). An empty database (a new home's SQLite file, a new PostgreSQL database) has nothing to
migrate: the first entry point that opens it creates it at the newest revision.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from sqlalchemy import URL, Engine, create_engine, event, inspect, text
from sqlalchemy.exc import ArgumentError, OperationalError, ProgrammingError
from sqlalchemy.orm import DeclarativeBase

if TYPE_CHECKING:
    from payops.store.settings import PayopsSettings

UPGRADE_COMMAND = "payops db upgrade"

MIGRATIONS = Path(__file__).parent / "migrations"
#: The newest revision of every branch in ``migrations/versions`` (a test checks it against Alembic's own
#: reading of that folder). A database that records exactly these needs no migration, so a command skips
#: Alembic's import and script parsing (a cost every command would pay) when nothing is to be done.
SCHEMA_HEADS = frozenset({"0012_notice_recipients"})
DATABASE_FILE_MODE = 0o600
"""A SQLite database file payops makes is its owner's alone (password hashes, sessions, the audit trail)."""


class Base(DeclarativeBase):
    """Every payops table. Each feature declares its tables in its own module of this package."""


def shown_url(url: str) -> str:
    """``url`` as an operator may read it: the password masked (``***``); a URL that cannot be parsed is not
    shown at all (it could be a password pasted in the wrong place)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(the configured database URL cannot be parsed)"


@dataclass(frozen=True)
class NoDatabase:
    """The payops database a run could not open, and why: one line for an operator, never its URL (it may
    hold a password). A run without it still runs what needs no database (a dry run, the reports)."""

    reason: str


RunDatabase: TypeAlias = Engine | NoDatabase
"""What a run holds of the payops database: its engine, or why there is none."""


class SchemaBehind(RuntimeError):
    """The database's schema is not the one this payops needs; the message is one line for an operator."""

    def __init__(self, url: str, recorded: frozenset[str]) -> None:
        have = ", ".join(sorted(recorded)) or "none"
        need = ", ".join(sorted(SCHEMA_HEADS))
        super().__init__(
            f"the payops database {shown_url(url)} is at revision {have}, this payops needs {need}:"
            f" run `{UPGRADE_COMMAND}` (or `payops serve`, which upgrades it)"
        )


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API connection
    # WAL lets readers run beside one writer (console + relay + CLI on one file); busy_timeout waits for the
    # writer instead of failing with "database is locked"; foreign keys are off in SQLite unless asked for.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite database URL; None for an in-memory database or a ``file:`` URI (``uri=true``:
    SQLite parses it itself)."""
    database = url.database
    if not database or database == ":memory:" or url.query.get("uri") or url.query.get("mode") == "memory":
        return None
    return Path(database)


def create_private_file(path: Path) -> bool:
    """Create ``path`` empty, its owner's alone (:data:`DATABASE_FILE_MODE`, whatever the umask or the
    folder's mode) when it does not exist; True when it was made here. SQLite gives the ``-wal`` and ``-shm``
    files it makes beside a database the database file's mode, so a file made this way before SQLite opens
    it keeps all three private."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DATABASE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, DATABASE_FILE_MODE)  # exactly: the umask may have taken the owner's write bit
    finally:
        os.close(fd)
    return True


def _private_sqlite_file(path: Path) -> Callable[..., None]:
    def before_connect(*_args: Any) -> None:  # SQLAlchemy's do_connect event: before SQLite opens the file
        if path.parent.is_dir():  # else SQLite says itself that it cannot open the file
            create_private_file(path)

    return before_connect


def open_engine(url: str) -> Engine:
    """A new engine for ``url``; the caller owns it and disposes of it. Entry points use
    :func:`open_database`, which keeps one per URL for the process. A SQLite file is made mode 0600 before
    SQLite makes it (:func:`create_private_file`)."""
    engine = create_engine(url, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        path = sqlite_file(engine.url)
        if path is not None:
            event.listen(engine, "do_connect", _private_sqlite_file(path))
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


def migrate(engine: Engine, audit_key: Callable[[], bytes] | None = None) -> None:
    """Bring the schema to the newest revision (every branch head); nothing to do when it is there.
    ``audit_key`` reads the audit chain's key for a migration that re-chains existing entries."""
    if recorded_revisions(engine) == SCHEMA_HEADS:
        return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["audit_key"] = audit_key
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            # Workers starting together would each create alembic_version and the tables (a unique-key
            # violation in pg_type for the loser): a transaction-level advisory lock lets one migrate at once.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7261001)")
        config.attributes["connection"] = connection
        command.upgrade(config, "heads")


def _is_empty(engine: Engine) -> bool:
    """True when the database holds no table at all (a new SQLite file, a new PostgreSQL database)."""
    return not inspect(engine).get_table_names()


def check_schema(engine: Engine, url: str, audit_key: Callable[[], bytes] | None = None) -> None:
    """Nothing when the schema is at the newest revision; an empty database is created there (there is
    nothing to migrate); anything else raises :class:`SchemaBehind`."""
    recorded = recorded_revisions(engine)
    if recorded == SCHEMA_HEADS:
        return
    if not recorded and _is_empty(engine):
        migrate(engine, audit_key)
        return
    raise SchemaBehind(url, recorded)


# One engine per database URL for the process, and whether its schema was checked: every store of a process
# (the console's routes and its webhook relay, a flow's approval gate, pre-flight cache and reconciliation)
# shares one connection pool, and the schema is read once, not per use. A module-level cache on purpose:
# engines are thread-safe and meant to live as long as the process (SQLAlchemy's own advice).
_engines: dict[str, Engine] = {}
_checked: set[str] = set()
_lock = threading.Lock()


def _engine_for(url: str) -> Engine:
    engine = _engines.get(url)
    if engine is None:
        engine = _engines[url] = open_engine(url)
    return engine


def open_database(settings: PayopsSettings) -> Engine:
    """The process's engine for the settings' database, its schema checked (:func:`check_schema`) the first
    time. Raises :class:`SchemaBehind`; the caller never disposes of it."""
    url = settings.database
    with _lock:
        engine = _engine_for(url)
        if url not in _checked:
            check_schema(engine, url, settings.audit_key_bytes)
            _checked.add(url)
    return engine


def upgrade_database(settings: PayopsSettings) -> Engine:
    """The process's engine for the settings' database, migrated to the newest revision (`payops serve`,
    `payops db upgrade`)."""
    url = settings.database
    with _lock:
        engine = _engine_for(url)
        migrate(engine, settings.audit_key_bytes)
        _checked.add(url)
    return engine
