"""Tasks an operator declares, and the task each session names.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from verifier.store.models import UTCDateTime

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("repository", sa.Text(), nullable=True),
        sa.Column("fail_to_pass", sa.JSON(), nullable=False),
        sa.Column("pass_to_pass", sa.JSON(), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("added_at", UTCDateTime(), nullable=False),
        sa.Column("added_by", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_tasks")),
    )
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("task_id", sa.String(128), nullable=True))
        batch.create_index(op.f("ix_sessions_task_id"), ["task_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_index(op.f("ix_sessions_task_id"))
        batch.drop_column("task_id")
    op.drop_table("tasks")
