"""Users, sessions, approval tiers, console run records and decisions, the audit trail.

Revision ID: 0002_users_sessions_audit
Revises: 0001_baseline
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_users_sessions_audit"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(32), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("password_hash", sa.String(255), nullable=False),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("last_seen_at", sa.DateTime, nullable=False),
        sa.Column("client", sa.String(64), nullable=False),
    )
    op.create_index("ix_sessions_user_id", "sessions", ["user_id"])
    op.create_table(
        "approval_tiers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("min_total", sa.Numeric(20, 2), nullable=False, unique=True),
        sa.Column("approvers", sa.Integer, nullable=False),
    )
    op.create_table(
        "payout_runs",
        sa.Column("flow_run_id", sa.String(36), primary_key=True),
        sa.Column("upload_id", sa.String(64), nullable=False),
        sa.Column("initiator", sa.String(32), nullable=False),
        sa.Column("total", sa.String(32), nullable=False),
        sa.Column("required", sa.Integer, nullable=False),
        sa.Column("rule", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "run_decisions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("flow_run_id", sa.String(36), nullable=False),
        sa.Column("user", sa.String(32), nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("token", sa.Text, nullable=False),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("flow_run_id", "user"),
    )
    op.create_index("ix_run_decisions_flow_run_id", "run_decisions", ["flow_run_id"])
    op.create_table(
        "audit_log",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("client", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("object", sa.String(255), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    for column in ("at", "actor", "action"):
        op.create_index(f"ix_audit_log_{column}", "audit_log", [column])


def downgrade() -> None:
    for table in ("audit_log", "run_decisions", "payout_runs", "approval_tiers", "sessions", "users"):
        op.drop_table(table)
