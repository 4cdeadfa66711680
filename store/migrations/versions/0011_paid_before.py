"""What was paid before: each approved payout keeps a digest of its payee number, amount and currency, and
each run the fingerprint of its sheet, so a sheet paid in the last days is found before it is approved again
(tasks/payouts/paid_before.py); an approval request keeps what it found.

Revision ID: 0011_paid_before
Revises: 0010_retry_rows_currency
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_paid_before"
down_revision = "0010_retry_rows_currency"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recon_run_rows") as batch:
        batch.add_column(sa.Column("digest", sa.String(32), nullable=True))
    op.create_index("ix_recon_run_rows_digest", "recon_run_rows", ["digest"])
    with op.batch_alter_table("recon_runs") as batch:
        batch.add_column(sa.Column("sheet", sa.String(64), nullable=True))
        batch.add_column(sa.Column("name", sa.String(200), nullable=True))
    op.create_index("ix_recon_runs_sheet", "recon_runs", ["sheet"])
    op.create_index("ix_recon_runs_sent_from", "recon_runs", ["sent_from"])
    with op.batch_alter_table("approval_requests") as batch:
        batch.add_column(sa.Column("paid_before", sa.Text(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("paid_before")
    op.drop_index("ix_recon_runs_sent_from", "recon_runs")
    op.drop_index("ix_recon_runs_sheet", "recon_runs")
    with op.batch_alter_table("recon_runs") as batch:
        batch.drop_column("name")
        batch.drop_column("sheet")
    op.drop_index("ix_recon_run_rows_digest", "recon_run_rows")
    with op.batch_alter_table("recon_run_rows") as batch:
        batch.drop_column("digest")
