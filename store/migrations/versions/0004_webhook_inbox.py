"""The webhook inbox: accepted Payments Service events, kept before the answer, forwarded to Prefect after.

Revision ID: 0004_webhook_inbox
Revises: 0003_lookup_cache
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_webhook_inbox"
down_revision = "0003_lookup_cache"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_inbox",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("envelope", sa.Text(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("forward", sa.Boolean(), nullable=False),
        sa.Column("pending", sa.Boolean(), nullable=False),
        sa.Column("forwarded_at", sa.Float(), nullable=True),
        sa.Column("sent_at", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=False),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
        sa.Column("last_error", sa.String(200), nullable=True),
    )
    op.create_index("ix_webhook_inbox_pending", "webhook_inbox", ["pending", "received_at"])


def downgrade() -> None:
    op.drop_index("ix_webhook_inbox_pending", table_name="webhook_inbox")
    op.drop_table("webhook_inbox")
