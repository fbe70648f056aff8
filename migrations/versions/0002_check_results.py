"""Check statuses as rows (a new check needs no column), and the blob digest cache.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKS = ("changes", "tests", "audit")


def upgrade() -> None:
    op.create_table(
        "check_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("check_name", sa.String(length=32), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["verification_runs.id"],
            name=op.f("fk_check_results_run_id_verification_runs"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_check_results")),
        sa.UniqueConstraint(
            "run_id", "check_name", name=op.f("uq_check_results_run_id_check_name")
        ),
    )
    op.create_index(op.f("ix_check_results_run_id"), "check_results", ["run_id"], unique=False)
    # The statuses of earlier runs move into rows; the durations are in each run's result.
    for ordinal, name in enumerate(CHECKS):
        op.execute(
            "INSERT INTO check_results (run_id, check_name, ordinal, status, duration_s) "
            f"SELECT id, '{name}', {ordinal}, {name}_status, 0.0 FROM verification_runs "
            f"WHERE {name}_status IS NOT NULL"
        )
    with op.batch_alter_table("verification_runs") as batch:
        for name in CHECKS:
            batch.drop_column(f"{name}_status")
    op.create_table(
        "blob_digests",
        sa.Column("blob_id", sa.String(length=64), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("blob_id", name=op.f("pk_blob_digests")),
    )


def downgrade() -> None:
    op.drop_table("blob_digests")
    with op.batch_alter_table("verification_runs") as batch:
        for name in CHECKS:
            batch.add_column(sa.Column(f"{name}_status", sa.String(length=16), nullable=True))
    for name in CHECKS:
        op.execute(
            f"UPDATE verification_runs SET {name}_status = (SELECT status FROM check_results "
            f"WHERE check_results.run_id = verification_runs.id "
            f"AND check_results.check_name = '{name}')"
        )
    op.drop_index(op.f("ix_check_results_run_id"), table_name="check_results")
    op.drop_table("check_results")
