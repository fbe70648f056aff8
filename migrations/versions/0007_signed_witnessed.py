"""Ingest tokens bound to an agent; trail entries witnessed as they were written.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from verifier.store.models import UTCDateTime

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("agent", sa.Text(), nullable=True))
    op.create_table(
        "witnessed_entries",
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("entry_hash", sa.String(64), nullable=False),
        sa.Column("entry", sa.LargeBinary(), nullable=False),
        sa.Column("received_at", UTCDateTime(), nullable=False),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("session_id", "idx", name=op.f("pk_witnessed_entries")),
    )


def downgrade() -> None:
    op.drop_table("witnessed_entries")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("agent")
