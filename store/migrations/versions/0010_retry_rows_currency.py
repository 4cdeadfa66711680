"""Retry rows keep the currency their run read the sheet with (a sheet without a currency column: the one
chosen for it or read from its amount header), so a retry reads its sheet the same way.

Revision ID: 0010_retry_rows_currency
Revises: 0009_run_summaries
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_retry_rows_currency"
down_revision = "0009_run_summaries"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("retry_rows") as batch:
        batch.add_column(sa.Column("currency", sa.String(3), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("retry_rows") as batch:
        batch.drop_column("currency")
