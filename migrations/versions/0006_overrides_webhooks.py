"""Verdict overrides beside the computed verdict; webhook deliveries.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from verifier.store.models import UTCDateTime

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("override_status", sa.String(32), nullable=True))
        batch.add_column(sa.Column("override_id", sa.Integer(), nullable=True))
    op.create_table(
        "verdict_overrides",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_verdict_overrides_session_id_sessions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verdict_overrides")),
    )
    op.create_index(
        op.f("ix_verdict_overrides_session_id"), "verdict_overrides", ["session_id"], unique=False
    )
    _append_only("verdict_overrides")
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("webhook", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime(), nullable=True),
        sa.Column("last_attempt_at", UTCDateTime(), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
    )
    op.create_index(
        "ix_webhook_deliveries_state_next",
        "webhook_deliveries",
        ["state", "next_attempt_at"],
        unique=False,
    )
    op.create_index(
        op.f("ix_webhook_deliveries_session_id"),
        "webhook_deliveries",
        ["session_id"],
        unique=False,
    )


def _append_only(table: str) -> None:
    """Triggers that refuse UPDATE and DELETE: overrides are only ever appended."""
    if op.get_bind().dialect.name == "sqlite":
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{event.lower()} BEFORE {event} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            )
        return
    op.execute(
        f"CREATE FUNCTION {table}_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN RAISE EXCEPTION '{table} is append-only'; END $$"
    )
    op.execute(
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {table}_append_only()"
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_webhook_deliveries_session_id"), table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_state_next", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS verdict_overrides_no_update")
        op.execute("DROP TRIGGER IF EXISTS verdict_overrides_no_delete")
    op.drop_index(op.f("ix_verdict_overrides_session_id"), table_name="verdict_overrides")
    op.drop_table("verdict_overrides")
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP FUNCTION IF EXISTS verdict_overrides_append_only()")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("override_id")
        batch.drop_column("override_status")
