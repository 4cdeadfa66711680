"""Who holds Prefect's login: ``users.prefect_login``. A run started outside payops (Prefect's UI or API, a
schedule, an automation) has no signed initiator; any of these users could have started it, so none of them
may approve it.

Revision ID: 0008_prefect_login
Revises: 0007_retry_rows
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_prefect_login"
down_revision = "0007_retry_rows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("prefect_login", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("prefect_login")
