"""The database schema: sessions, their claimed changes, verification runs and findings.

Portable to SQLite and PostgreSQL: no dialect-specific types, integer surrogate
keys, constraint names from one naming convention so that Alembic autogenerate
compares stably. Runs are append-only: a re-verification adds a row and never
touches the previous ones. Background jobs live in procrastinate's own tables
(PostgreSQL only, created by migration 0005, outside these models); a run keeps
the id of the job that produced it.

Each session carries its current delivery status (`delivery_status`,
`verdict_run_id`, `latest_run_id`), kept in the transaction that records a
run, and `session_counts` keeps the number of sessions per (day, agent, model,
repository, done, delivery status), so that rates over a million sessions read
a few thousand rows, not the sessions table.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """An aware datetime stored in UTC; naive values are refused, never guessed.

    SQLite keeps no offset, so what it returns is marked UTC again on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """`value` in UTC for the database (naive for SQLite); a naive `value` is refused."""
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} refused: give a UTC offset")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """The stored moment, aware and in UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    """Now, aware and in UTC: the default of the models' time columns."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """The models' base: one metadata, its constraint names from `NAMING_CONVENTION`."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class SessionModel(Base):
    """One ingested report: the raw bytes, byte for byte, and the fields we query on."""

    __tablename__ = "sessions"

    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    agent_name: Mapped[str] = mapped_column(Text)
    agent_version: Mapped[str | None] = mapped_column(Text)
    agent_model: Mapped[str | None] = mapped_column(Text)
    tool_profile: Mapped[str | None] = mapped_column(Text)
    repo_name: Mapped[str] = mapped_column(Text)
    base_commit: Mapped[str] = mapped_column(String(64))
    head_commit: Mapped[str | None] = mapped_column(String(64))
    raw_status: Mapped[str] = mapped_column(Text)  # as the agent wrote it
    status: Mapped[str] = mapped_column(Text)  # canonical
    done: Mapped[bool] = mapped_column(Boolean)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Deferred: listings never load the bytes, `Store.report_bytes` does. NULL once
    # pruned (`verifier prune`): the hash stays, and every verdict with it.
    report: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    report_sha256: Mapped[str] = mapped_column(String(64))
    ingested_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Columns are in the order the migrations left them (added ones last), so that a new
    # SQLite store created from these models is the migrated one (engine.create_at_head).
    branch: Mapped[str | None] = mapped_column(Text)
    pruned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The current verdict, kept with each run: pending (no run yet), delivered,
    # not_delivered (the latest conclusive run), or inconclusive (no conclusive run).
    delivery_status: Mapped[str] = mapped_column(String(32), default="pending")
    verdict_run_id: Mapped[int | None] = mapped_column(Integer)
    latest_run_id: Mapped[int | None] = mapped_column(Integer)
    verified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A person's override of the verdict (`verdict_overrides`), beside it, never over
    # it: delivered or not_delivered, NULL when none stands (migration 0006).
    override_status: Mapped[str | None] = mapped_column(String(32))
    override_id: Mapped[int | None] = mapped_column(Integer)
    # The task the report names (`task_id`), resolved against the operator's tasks when
    # the session is verified (migration 0009); NULL when it names none.
    task_id: Mapped[str | None] = mapped_column(String(128))

    __table_args__ = (
        # Listings page newest first by (ended_at, session_id); filters use these.
        Index("ix_sessions_ended_at_session_id", "ended_at", "session_id"),
        Index("ix_sessions_agent_name", "agent_name"),
        Index("ix_sessions_agent_model", "agent_model"),
        Index("ix_sessions_repo_name", "repo_name"),
        Index("ix_sessions_delivery_status", "delivery_status"),
        Index("ix_sessions_head_commit", "head_commit"),
        Index("ix_sessions_task_id", "task_id"),
    )


class ClaimedChangeModel(Base):
    """One claimed file change, in the order of the report's ``changes``."""

    __tablename__ = "claimed_changes"
    __table_args__ = (UniqueConstraint("session_id", "ordinal"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.session_id"))
    ordinal: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(String(16))
    sha256_before: Mapped[str | None] = mapped_column(String(64))
    sha256_after: Mapped[str | None] = mapped_column(String(64))


class RunModel(Base):
    """One verification of one session; ``result`` is the whole ``Verification.to_dict()``."""

    __tablename__ = "verification_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.session_id"), index=True)
    verifier_version: Mapped[str] = mapped_column(String(64))
    # Indexed (migration 0010): /metrics counts the runs by verdict at every scrape, from
    # the index rather than by reading every run with its result.
    delivery_status: Mapped[str] = mapped_column(String(32), index=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    duration_s: Mapped[float] = mapped_column(Float)
    # Plain JSON rather than JSONB: PostgreSQL then keeps the text, key order included.
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    # Why the run happened: cli, ingest, reverify, retry (an inconclusive run again), recheck.
    reason: Mapped[str | None] = mapped_column(String(16))
    # The queue's job that produced the run (procrastinate_jobs.id), and who ran it.
    job_id: Mapped[int | None] = mapped_column(BigInteger)
    worker: Mapped[str | None] = mapped_column(Text)


class CheckResultModel(Base):
    """The status of one check in one run: a row per check, so a new check needs no column."""

    __tablename__ = "check_results"
    __table_args__ = (UniqueConstraint("run_id", "check_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("verification_runs.id"), index=True)
    check_name: Mapped[str] = mapped_column(String(32))
    ordinal: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    duration_s: Mapped[float] = mapped_column(Float)


class BlobDigestModel(Base):
    """SHA-256 of a git blob's bytes, by blob id: a content address, valid in any repository.

    Filled by the changes check through the pipeline, so re-verifying a session,
    or another session on the same base, reads no blob twice.
    """

    __tablename__ = "blob_digests"

    blob_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))


class FindingModel(Base):
    """One finding of one check of one run, numbered in the check's order."""

    __tablename__ = "findings"
    __table_args__ = (UniqueConstraint("run_id", "check_name", "ordinal"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("verification_runs.id"), index=True)
    check_name: Mapped[str] = mapped_column(String(32))
    ordinal: Mapped[int] = mapped_column(Integer)
    code: Mapped[str] = mapped_column(String(128), index=True)
    message: Mapped[str] = mapped_column(Text)
    path: Mapped[str | None] = mapped_column(Text)
    expected: Mapped[str | None] = mapped_column(Text)
    found: Mapped[str | None] = mapped_column(Text)


class RejectedReportModel(Base):
    """Bytes we could not read as a report, with the field that failed.

    Kept whole up to ``max_report_bytes``; of a larger report only the first
    bytes are kept, beside the size and the SHA-256 of the whole.
    """

    __tablename__ = "rejected_reports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    source: Mapped[str] = mapped_column(Text)
    field: Mapped[str] = mapped_column(Text)
    problem: Mapped[str] = mapped_column(Text)
    report: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    report_sha256: Mapped[str] = mapped_column(String(64), index=True)
    # The size of the whole report: more than len(report) when only its first bytes are kept.
    report_size: Mapped[int] = mapped_column(BigInteger)


class SessionCountModel(Base):
    """How many sessions are in one state: the aggregate `GET /v1/stats` reads.

    One row per (day the session ended, dimension, key, done, delivery status),
    where the dimension is ``all`` (key '') or one of ``agent``, ``model`` ('' for
    none) and ``repo`` with its value as the key: a session counts once in each
    dimension. Totals and days read the ``all`` rows only, an agent breakdown the
    ``agent`` rows: the cost is the number of days times the values of one
    dimension, never the number of sessions, nor the combinations of agents,
    models and repositories. Kept in the transactions that ingest a session and
    record a run, so the counts are never behind the sessions.
    """

    __tablename__ = "session_counts"
    __table_args__ = (
        UniqueConstraint(
            "day", "dimension", "key", "done", "delivery_status", name="uq_session_counts_key"
        ),
        Index("ix_session_counts_dimension_day", "dimension", "day"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    day: Mapped[date] = mapped_column(Date)
    dimension: Mapped[str] = mapped_column(String(8))  # all, agent, model, repo
    key: Mapped[str] = mapped_column(Text)
    done: Mapped[bool] = mapped_column(Boolean)
    delivery_status: Mapped[str] = mapped_column(String(32))
    sessions: Mapped[int] = mapped_column(BigInteger)


class TokenModel(Base):
    """An API token: only the SHA-256 of its secret is kept, never the secret."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(String(16))  # ingest, read, export, admin
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # An ingest token bound to one agent posts only that agent's reports and trails.
    agent: Mapped[str | None] = mapped_column(Text)


class AdminLogModel(Base):
    """An administrative act: who did what, when. Append-only: triggers refuse UPDATE
    and DELETE on both engines (migration 0004)."""

    __tablename__ = "admin_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(Text)  # "token:<name>" or "cli:<user>"
    action: Mapped[str] = mapped_column(String(64))  # token.create, session.reverify, ...
    subject: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)


class TestResultCacheModel(Base):
    """A conclusive test run, keyed by what decided it: the tree actually tested,
    the test command, the environment, the sandbox settings and the verifier's
    version (all in `key`, a SHA-256). The same tree is never tested twice."""

    __tablename__ = "test_result_cache"
    __test__ = False  # not a pytest class

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    session_id: Mapped[str] = mapped_column(String(128))  # the session first tested
    result: Mapped[dict[str, Any]] = mapped_column(JSON)


class VerdictOverrideModel(Base):
    """A person's verdict on a session, with who, why and when. Append-only (triggers,
    migration 0006): a later override, or a ``cleared`` one, supersedes an earlier one
    and both stay. The computed verdict is never touched."""

    __tablename__ = "verdict_overrides"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.session_id"), index=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    author: Mapped[str] = mapped_column(Text)  # "token:<name>" or "cli:<user>"
    status: Mapped[str] = mapped_column(String(32))  # delivered, not_delivered, cleared
    reason: Mapped[str] = mapped_column(Text)


class WebhookDeliveryModel(Base):
    """One notification to one webhook: the exact body sent, its state and its attempts.

    ``state`` is pending (to be tried at ``next_attempt_at``), delivered (a 2xx
    answer) or failed (attempts exhausted). The delivery log is these rows.
    """

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_state_next", "state", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    webhook: Mapped[str] = mapped_column(Text)  # the configured webhook's name
    url: Mapped[str] = mapped_column(Text)
    event: Mapped[str] = mapped_column(String(32))  # silent_failure, verdict
    session_id: Mapped[str] = mapped_column(String(128), index=True)
    run_id: Mapped[int | None] = mapped_column(Integer)
    body: Mapped[bytes] = mapped_column(LargeBinary)
    state: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)


class WitnessedEntryModel(Base):
    """One trail entry as the witness received it while the session ran (migrations 0007,
    0008).

    The key is the session, the agent whose tokens posted the trail, and the entry's
    index: each agent's tokens witness a trail of their own under a session id, which
    no other agent's token can start, extend or block; an entry is witnessed once; a
    later report's trail must extend its own agent's exactly (`verifier.store.witness`).
    """

    __tablename__ = "witnessed_entries"
    __table_args__ = (PrimaryKeyConstraint("session_id", "agent", "idx"),)

    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    entry_hash: Mapped[str] = mapped_column(String(64))
    entry: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The agent of the token that posted it; "" for a token bound to no agent. Last, as
    # migration 0008 left it; the primary key's order is (session_id, agent, idx).
    agent: Mapped[str] = mapped_column(Text, primary_key=True, server_default="")


class TaskModel(Base):
    """A task an operator declared with `verifier task add` or ``POST /v1/tasks`` (migration
    0009): what a session naming it must achieve. The tasks file's tasks are never stored
    here: they are read from the file, and win over these."""

    __tablename__ = "tasks"

    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    # The repository (`repo.name`) the task is for; NULL: any.
    repository: Mapped[str | None] = mapped_column(Text)
    # Test ids in each runner's own notation, as lists of strings.
    fail_to_pass: Mapped[list[str]] = mapped_column(JSON)
    pass_to_pass: Mapped[list[str]] = mapped_column(JSON)
    read_only: Mapped[bool] = mapped_column(Boolean)
    # Who declared it, when; a replaced task takes its replacer's (the admin log keeps both).
    added_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    added_by: Mapped[str] = mapped_column(Text)
