"""Alembic environment: runs on the connection ``store.migrate`` hands over (no alembic.ini, no URL here)."""

from __future__ import annotations

import payops.store.tables  # noqa: F401 - registers every table on Base.metadata
from alembic import context
from payops.store.database import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
