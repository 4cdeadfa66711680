"""Notices for one person: a notice with a ``user`` is shown to that user only (the outcome of a run they
started or whose sheet they uploaded: approved, rejected with the comment, completed, failed); a notice
without one is for every user of its role, as before.

Revision ID: 0012_notice_recipients
Revises: 0011_paid_before
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_notice_recipients"
down_revision = "0011_paid_before"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("notices") as batch:
        batch.add_column(sa.Column("user", sa.String(32), nullable=True))
        batch.create_index("ix_notices_user", ["user"])


def downgrade() -> None:
    with op.batch_alter_table("notices") as batch:
        batch.drop_index("ix_notices_user")
        batch.drop_column("user")
