"""Baseline: an empty payops database. Every feature's tables come in revisions after this one.

Revision ID: 0001_baseline
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
