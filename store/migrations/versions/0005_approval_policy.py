"""Approval policy per currency, approval requests and their rows, notices, personal API tokens, keyed audit.

* ``approval_tiers`` gains ``currency`` (``*`` for every currency); existing tiers keep applying to all.
* ``payout_runs`` (who started a console run) is replaced by ``approval_requests``, which the payout flow
  writes for every run that waits, whatever started it; the audit trail keeps every ``run.started`` entry.
* ``audit_log`` entries are re-chained with HMAC-SHA256 under the audit key (store/audit.py): the chain as it
  stands at this upgrade is taken as the truth, and from here on editing a row needs the key.

Revision ID: 0005_approval_policy
Revises: 0004_webhook_inbox
Create Date: 2026-11-25
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0005_approval_policy"
down_revision = "0004_webhook_inbox"
branch_labels = None
depends_on = None


def _tiers() -> None:
    bind = op.get_bind()
    old = bind.execute(sa.text("SELECT min_total, approvers FROM approval_tiers")).fetchall()
    op.drop_table("approval_tiers")
    tiers = op.create_table(
        "approval_tiers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("min_total", sa.Numeric(20, 2), nullable=False),
        sa.Column("approvers", sa.Integer, nullable=False),
        sa.UniqueConstraint("currency", "min_total"),
    )
    if old:
        op.bulk_insert(tiers, [{"currency": "*", "min_total": m, "approvers": n} for m, n in old])


def _rechain_audit() -> None:
    from alembic import context
    from payops.store.audit import GENESIS, entry_hash

    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT seq, at, actor, client, action, object, detail FROM audit_log ORDER BY seq")
    ).fetchall()
    if not rows:
        return
    read_key = context.config.attributes.get("audit_key")  # store.database.migrate's caller hands it over
    if read_key is None:
        raise RuntimeError("re-chaining the audit trail needs its key: run `payops db upgrade`")
    key = read_key()
    prev = GENESIS
    for seq, at, actor, client, action, obj, detail in rows:
        moment = datetime.fromisoformat(at) if isinstance(at, str) else at  # SQLite hands back text
        digest = entry_hash(key, prev, seq, moment.replace(tzinfo=None), actor, client, action, obj, detail)
        bind.execute(
            sa.text("UPDATE audit_log SET prev_hash = :p, hash = :h WHERE seq = :s"),
            {"p": prev, "h": digest, "s": seq},
        )
        prev = digest


def upgrade() -> None:
    _tiers()
    op.drop_table("payout_runs")
    op.create_table(
        "approval_requests",
        sa.Column("flow_run_id", sa.String(36), primary_key=True),
        sa.Column("label", sa.String(64), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("initiator", sa.String(32), nullable=True),
        sa.Column("uploader", sa.String(32), nullable=True),
        sa.Column("required", sa.Integer, nullable=False),
        sa.Column("excluded", sa.Text, nullable=False),
        sa.Column("policy", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("totals", sa.Text, nullable=False),
        sa.Column("rows", sa.Integer, nullable=False),
        sa.Column("findings", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("deadline", sa.DateTime, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("decided_at", sa.DateTime, nullable=True),
        sa.Column("reminded_at", sa.DateTime, nullable=True),
    )
    op.create_index("ix_approval_requests_label", "approval_requests", ["label"])
    op.create_index("ix_approval_requests_state", "approval_requests", ["state"])
    op.create_table(
        "approval_rows",
        sa.Column("flow_run_id", sa.String(36), primary_key=True),
        sa.Column("row", sa.Integer, primary_key=True),
        sa.Column("reference", sa.Text, nullable=False),
        sa.Column("amount", sa.String(32), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("provider", sa.Text, nullable=False),
        sa.Column("destination_type", sa.String(16), nullable=False),
        sa.Column("destination", sa.Text, nullable=False),
        sa.Column("payee", sa.Text, nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("look", sa.Boolean, nullable=False),
    )
    op.create_index("ix_approval_rows_look", "approval_rows", ["look"])
    op.create_table(
        "notices",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("flow_run_id", sa.String(36), nullable=False),
        sa.Column("label", sa.String(64), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("excluded", sa.Text, nullable=False),
        sa.Column("closed_at", sa.DateTime, nullable=True),
    )
    for column in ("created_at", "flow_run_id", "closed_at"):
        op.create_index(f"ix_notices_{column}", "notices", [column])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("last_used_at", sa.DateTime, nullable=True),
        sa.Column("revoked_at", sa.DateTime, nullable=True),
    )
    op.create_index("ix_api_tokens_user_id", "api_tokens", ["user_id"])
    _rechain_audit()


def downgrade() -> None:
    for table in ("api_tokens", "notices", "approval_rows", "approval_requests"):
        op.drop_table(table)
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
