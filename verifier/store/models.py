"""The database schema: sessions, their claimed changes, verification runs and findings.

Portable to SQLite and PostgreSQL: no dialect-specific types, integer surrogate
keys, constraint names from one naming convention so that Alembic autogenerate
compares stably. Runs are append-only: a re-verification adds a row and never
touches the previous ones. A multi-worker queue can later add a ``jobs`` table
(session_id, state, lease_owner, lease_expires_at) claimed in PostgreSQL with
``SELECT ... FOR UPDATE SKIP LOCKED``; nothing here assumes a single writer.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
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
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} refused: give a UTC offset")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
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
    # Deferred: listings never load the bytes, `Store.report_bytes` does.
    report: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    report_sha256: Mapped[str] = mapped_column(String(64))
    ingested_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


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
    delivery_status: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    duration_s: Mapped[float] = mapped_column(Float)
    # Plain JSON rather than JSONB: PostgreSQL then keeps the text, key order included.
    result: Mapped[dict[str, Any]] = mapped_column(JSON)


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
