"""The service: current verdict per session, counts for the rates, tokens, admin log,
runs tied to their jobs, the test result cache, pruned reports.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-14
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from verifier.store.models import UTCDateTime

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SESSION_INDEXES = {
    "ix_sessions_ended_at_session_id": ["ended_at", "session_id"],
    "ix_sessions_agent_name": ["agent_name"],
    "ix_sessions_agent_model": ["agent_model"],
    "ix_sessions_repo_name": ["repo_name"],
    "ix_sessions_delivery_status": ["delivery_status"],
    "ix_sessions_head_commit": ["head_commit"],
}
CONCLUSIVE = "('delivered', 'not_delivered')"
# The dimensions of session_counts, with the SQL of each one's key.
DIMENSIONS = {
    "all": "''",
    "agent": "agent_name",
    "model": "coalesce(agent_model, '')",
    "repo": "repo_name",
}


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("branch", sa.Text(), nullable=True))
        batch.add_column(sa.Column("pruned_at", UTCDateTime(), nullable=True))
        batch.add_column(
            sa.Column("delivery_status", sa.String(32), nullable=False, server_default="pending")
        )
        batch.add_column(sa.Column("verdict_run_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("latest_run_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("verified_at", UTCDateTime(), nullable=True))
        batch.alter_column("report", existing_type=sa.LargeBinary(), nullable=True)
    with op.batch_alter_table("sessions") as batch:
        batch.alter_column("delivery_status", server_default=None, existing_type=sa.String(32))
    for name, columns in SESSION_INDEXES.items():
        op.create_index(name, "sessions", columns, unique=False)

    with op.batch_alter_table("verification_runs") as batch:
        batch.add_column(sa.Column("reason", sa.String(16), nullable=True))
        batch.add_column(sa.Column("job_id", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("worker", sa.Text(), nullable=True))

    # The current verdict of the sessions verified before this revision.
    op.execute(
        "UPDATE sessions SET "
        "verdict_run_id = (SELECT max(id) FROM verification_runs r WHERE "
        f"r.session_id = sessions.session_id AND r.delivery_status IN {CONCLUSIVE}), "
        "latest_run_id = (SELECT max(id) FROM verification_runs r "
        "WHERE r.session_id = sessions.session_id)"
    )
    op.execute(
        "UPDATE sessions SET "
        "delivery_status = CASE "
        "WHEN verdict_run_id IS NOT NULL THEN (SELECT delivery_status FROM verification_runs r "
        "WHERE r.id = sessions.verdict_run_id) "
        "WHEN latest_run_id IS NOT NULL THEN 'inconclusive' ELSE 'pending' END, "
        "verified_at = (SELECT finished_at FROM verification_runs r "
        "WHERE r.id = sessions.latest_run_id)"
    )

    op.create_table(
        "session_counts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("dimension", sa.String(8), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("delivery_status", sa.String(32), nullable=False),
        sa.Column("sessions", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_counts")),
        sa.UniqueConstraint(
            "day", "dimension", "key", "done", "delivery_status", name="uq_session_counts_key"
        ),
    )
    op.create_index(
        "ix_session_counts_dimension_day", "session_counts", ["dimension", "day"], unique=False
    )
    day = (
        "date(ended_at)"
        if op.get_bind().dialect.name == "sqlite"
        else "CAST(ended_at AT TIME ZONE 'UTC' AS date)"
    )
    for dimension, key in DIMENSIONS.items():
        op.execute(
            "INSERT INTO session_counts (day, dimension, key, done, delivery_status, sessions) "
            f"SELECT {day}, '{dimension}', {key}, done, delivery_status, count(*) FROM sessions "
            "GROUP BY 1, 3, 4, 5"
        )

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_api_tokens_token_sha256")),
    )
    op.create_table(
        "admin_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_log")),
    )
    _append_only("admin_log")
    op.create_table(
        "test_result_cache",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_test_result_cache")),
    )


def _append_only(table: str) -> None:
    """Triggers that refuse UPDATE and DELETE: the log is only ever appended to."""
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
    op.drop_table("test_result_cache")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS admin_log_no_update")
        op.execute("DROP TRIGGER IF EXISTS admin_log_no_delete")
        op.drop_table("admin_log")
    else:
        op.drop_table("admin_log")
        op.execute("DROP FUNCTION IF EXISTS admin_log_append_only()")
    op.drop_table("api_tokens")
    op.drop_index("ix_session_counts_dimension_day", table_name="session_counts")
    op.drop_table("session_counts")
    with op.batch_alter_table("verification_runs") as batch:
        batch.drop_column("worker")
        batch.drop_column("job_id")
        batch.drop_column("reason")
    for name in SESSION_INDEXES:
        op.drop_index(name, table_name="sessions")
    # A store with pruned reports cannot go back: `report` is NOT NULL again, and fails.
    with op.batch_alter_table("sessions") as batch:
        batch.alter_column("report", existing_type=sa.LargeBinary(), nullable=False)
        batch.drop_column("verified_at")
        batch.drop_column("latest_run_id")
        batch.drop_column("verdict_run_id")
        batch.drop_column("delivery_status")
        batch.drop_column("pruned_at")
        batch.drop_column("branch")
