"""The payops database: what the console and flows keep that the Payments Service does not.

Users, sessions, the audit trail, lookup and quote caches live here, reached through SQLAlchemy 2.0 and
migrated
by Alembic: a SQLite file under the payops home by default (no server needed), PostgreSQL by URL
(``PAYOPS_DATABASE_URL``) when several console replicas or workers share it. Payments state never lives here:
the Payments Service stays the source of truth for money. This room imports neither Prefect nor httpx.
"""

from payops.store.database import (
    Base,
    NoDatabase,
    RunDatabase,
    SchemaBehind,
    migrate,
    open_database,
    open_engine,
    shown_url,
    upgrade_database,
)
from payops.store.settings import PayopsSettings

__all__ = [
    "Base",
    "NoDatabase",
    "PayopsSettings",
    "RunDatabase",
    "SchemaBehind",
    "migrate",
    "open_database",
    "open_engine",
    "shown_url",
    "upgrade_database",
]
