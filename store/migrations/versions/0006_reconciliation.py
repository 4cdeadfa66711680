"""Reconciliation: runs' approved payouts, checks of runs and days, differences, wallet snapshots, open items.

Revision ID: 0006_reconciliation
Revises: 0005_approval_policy
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_reconciliation"
down_revision = "0005_approval_policy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recon_runs",
        sa.Column("label", sa.String(200), primary_key=True),
        sa.Column("sent_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "recon_run_rows",
        sa.Column("label", sa.String(200), primary_key=True),
        sa.Column("reference", sa.String(64), primary_key=True),
        sa.Column("row", sa.Integer(), nullable=False),
        sa.Column("amount", sa.String(32), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("fee_low", sa.String(32), nullable=True),
        sa.Column("fee_high", sa.String(32), nullable=True),
    )
    op.create_index("ix_recon_run_rows_reference", "recon_run_rows", ["reference"])
    op.create_table(
        "recon_checks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
    )
    op.create_index("ix_recon_checks_key", "recon_checks", ["key"])
    op.create_index("ix_recon_checks_checked_at", "recon_checks", ["checked_at"])
    op.create_table(
        "recon_differences",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "check_id", sa.Integer(), sa.ForeignKey("recon_checks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("reference", sa.String(64), nullable=True),
        sa.Column("label", sa.String(200), nullable=True),
        sa.Column("currency", sa.String(3), nullable=True),
        sa.Column("expected", sa.String(64), nullable=True),
        sa.Column("actual", sa.String(64), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
    )
    op.create_index("ix_recon_differences_check_id", "recon_differences", ["check_id"])
    op.create_index("ix_recon_differences_reference", "recon_differences", ["reference"])
    op.create_table(
        "recon_wallet_snapshots",
        sa.Column(
            "check_id", sa.Integer(), sa.ForeignKey("recon_checks.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("currency", sa.String(3), primary_key=True),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("balance", sa.String(32), nullable=False),
        sa.Column("reserved", sa.String(32), nullable=False),
    )
    op.create_table(
        "recon_open_items",
        sa.Column(
            "check_id", sa.Integer(), sa.ForeignKey("recon_checks.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("transaction_id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("reference", sa.String(64), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("booked", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    for table in ("recon_open_items", "recon_wallet_snapshots", "recon_differences", "recon_checks"):
        op.drop_table(table)
    op.drop_index("ix_recon_run_rows_reference", table_name="recon_run_rows")
    op.drop_table("recon_run_rows")
    op.drop_table("recon_runs")
