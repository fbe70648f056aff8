"""An index of the runs by verdict: what /metrics counts at every scrape.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        op.f("ix_verification_runs_delivery_status"),
        "verification_runs",
        ["delivery_status"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_verification_runs_delivery_status"), table_name="verification_runs")
