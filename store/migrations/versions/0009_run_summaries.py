"""Run summaries: the summary each payout run ended with, by flow run id (what the server answers the CLI).

Revision ID: 0009_run_summaries
Revises: 0008_prefect_login
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_run_summaries"
down_revision = "0008_prefect_login"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_summaries",
        sa.Column("flow_run_id", sa.String(36), primary_key=True),
        sa.Column("label", sa.String(200), nullable=True),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("written_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_run_summaries_label", "run_summaries", ["label"])


def downgrade() -> None:
    op.drop_table("run_summaries")
