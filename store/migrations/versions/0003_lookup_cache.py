"""Lookup and quote cache: holder names and fee quotes keyed by hashes, each with its own expiry.

Revision ID: 0003_lookup_cache
Revises: 0002_users_sessions_audit
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_lookup_cache"
down_revision = "0002_users_sessions_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lookup_cache",
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(255), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_lookup_cache_expires_at", "lookup_cache", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_lookup_cache_expires_at", table_name="lookup_cache")
    op.drop_table("lookup_cache")
