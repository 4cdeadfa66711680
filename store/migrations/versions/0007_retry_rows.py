"""Retry rows: the rows of a payout run to pay again, recorded as they fail, and the retry that claimed each.

Revision ID: 0007_retry_rows
Revises: 0006_reconciliation
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_retry_rows"
down_revision = "0006_reconciliation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retry_rows",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("parent_label", sa.String(200), nullable=False),
        sa.Column("parent_run_id", sa.String(36), nullable=True),
        sa.Column("reference", sa.String(64), nullable=False),
        sa.Column("headers", sa.JSON(), nullable=False),
        sa.Column("cells", sa.JSON(), nullable=False),
        sa.Column("column_map", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.Column("retry_label", sa.String(200), nullable=True),
        sa.Column("claimed_at", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("parent_label", "reference", name="uq_retry_rows_parent_reference"),
    )
    op.create_index("ix_retry_rows_parent_label", "retry_rows", ["parent_label"])
    op.create_index("ix_retry_rows_parent_run_id", "retry_rows", ["parent_run_id"])
    op.create_index("ix_retry_rows_retry_label", "retry_rows", ["retry_label"])


def downgrade() -> None:
    op.drop_table("retry_rows")
