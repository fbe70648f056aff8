"""The size of a rejected report, kept beside its first bytes when it was too large to hold.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("rejected_reports") as batch:
        batch.add_column(sa.Column("report_size", sa.BigInteger(), nullable=True))
    # Earlier rows kept the whole report: its size is the size of what is stored.
    op.execute("UPDATE rejected_reports SET report_size = length(report)")
    with op.batch_alter_table("rejected_reports") as batch:
        batch.alter_column("report_size", existing_type=sa.BigInteger(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("rejected_reports") as batch:
        batch.drop_column("report_size")
