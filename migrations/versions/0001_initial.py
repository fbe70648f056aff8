"""The initial schema: sessions, claimed changes, verification runs, findings, rejects.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model types: a migration must not change when the models do.
UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("agent_name", sa.Text(), nullable=False),
        sa.Column("agent_version", sa.Text(), nullable=True),
        sa.Column("agent_model", sa.Text(), nullable=True),
        sa.Column("tool_profile", sa.Text(), nullable=True),
        sa.Column("repo_name", sa.Text(), nullable=False),
        sa.Column("base_commit", sa.String(length=64), nullable=False),
        sa.Column("head_commit", sa.String(length=64), nullable=True),
        sa.Column("raw_status", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("started_at", UTC_DATETIME, nullable=False),
        sa.Column("ended_at", UTC_DATETIME, nullable=False),
        sa.Column("report", sa.LargeBinary(), nullable=False),
        sa.Column("report_sha256", sa.String(length=64), nullable=False),
        sa.Column("ingested_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_sessions")),
    )
    op.create_table(
        "claimed_changes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("sha256_before", sa.String(length=64), nullable=True),
        sa.Column("sha256_after", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_claimed_changes_session_id_sessions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_claimed_changes")),
        sa.UniqueConstraint(
            "session_id", "ordinal", name=op.f("uq_claimed_changes_session_id_ordinal")
        ),
    )
    op.create_table(
        "verification_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("verifier_version", sa.String(length=64), nullable=False),
        sa.Column("delivery_status", sa.String(length=32), nullable=False),
        sa.Column("changes_status", sa.String(length=16), nullable=True),
        sa.Column("tests_status", sa.String(length=16), nullable=True),
        sa.Column("audit_status", sa.String(length=16), nullable=True),
        sa.Column("started_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_verification_runs_session_id_sessions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verification_runs")),
    )
    op.create_index(op.f("ix_verification_runs_session_id"), "verification_runs", ["session_id"])
    op.create_table(
        "findings",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("check_name", sa.String(length=32), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=128), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("expected", sa.Text(), nullable=True),
        sa.Column("found", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["verification_runs.id"],
            name=op.f("fk_findings_run_id_verification_runs"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_findings")),
        sa.UniqueConstraint(
            "run_id", "check_name", "ordinal", name=op.f("uq_findings_run_id_check_name_ordinal")
        ),
    )
    op.create_index(op.f("ix_findings_code"), "findings", ["code"])
    op.create_index(op.f("ix_findings_run_id"), "findings", ["run_id"])
    op.create_table(
        "rejected_reports",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("received_at", UTC_DATETIME, nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("field", sa.Text(), nullable=False),
        sa.Column("problem", sa.Text(), nullable=False),
        sa.Column("report", sa.LargeBinary(), nullable=False),
        sa.Column("report_sha256", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rejected_reports")),
    )
    op.create_index(
        op.f("ix_rejected_reports_report_sha256"), "rejected_reports", ["report_sha256"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_rejected_reports_report_sha256"), table_name="rejected_reports")
    op.drop_table("rejected_reports")
    op.drop_index(op.f("ix_findings_run_id"), table_name="findings")
    op.drop_index(op.f("ix_findings_code"), table_name="findings")
    op.drop_table("findings")
    op.drop_index(op.f("ix_verification_runs_session_id"), table_name="verification_runs")
    op.drop_table("verification_runs")
    op.drop_table("claimed_changes")
    op.drop_table("sessions")
