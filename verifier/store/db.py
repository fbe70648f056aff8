"""The store: reports as received, and every verification run of them.

`Store.open(url)` connects to SQLite or PostgreSQL. A SQLite file is created and
migrated on first use; any other database must already be at the head revision
(`verifier db upgrade`), so that several workers never race to migrate it.
Callers get frozen rows (`SessionRow`, `RunRow`, `Rates`), never ORM objects.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Connection,
    Engine,
    Select,
    Subquery,
    create_engine,
    event,
    func,
    inspect,
    select,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    InterfaceError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from verifier import resources
from verifier.errors import ConfigError, InfrastructureError, NotFound, SessionConflict
from verifier.findings import CheckStatus, DeliveryStatus, Finding, Verification
from verifier.store.models import (
    BlobDigestModel,
    CheckResultModel,
    ClaimedChangeModel,
    FindingModel,
    RejectedReportModel,
    RunModel,
    SessionModel,
)

if TYPE_CHECKING:  # the contract's models load the google-genai SDK; the store never needs it
    from alembic.config import Config as AlembicConfig

    from verifier.contract import Report

MIGRATIONS_DIR = resources.migrations_dir()
# The newest migration. Opening a store that is already there needs no Alembic (whose
# import costs half a second of every command); a test keeps this equal to Alembic's head.
HEAD_REVISION = "0005"
SQLITE_BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
MIGRATION_LOCK_ID = 0x7665_7269  # any constant: PostgreSQL advisory lock key for migrating
# Alembic's `context` and `op` are module-level proxies: one command per process at a time.
_ALEMBIC_COMMAND = threading.Lock()


class NoStore(NotFound):
    """A reader found no database where the configuration points: nothing stored yet."""


@dataclass(frozen=True)
class SessionRow:
    """A stored session; the report bytes themselves come from `Store.report_bytes`."""

    session_id: str
    agent_name: str
    agent_version: str | None
    agent_model: str | None
    tool_profile: str | None
    repo_name: str
    base_commit: str
    head_commit: str | None
    raw_status: str
    status: str
    done: bool
    started_at: datetime
    ended_at: datetime
    report_sha256: str
    ingested_at: datetime


@dataclass(frozen=True)
class RunRow:
    """One verification run; `findings` in check order, then in each check's order."""

    id: int
    session_id: str
    verifier_version: str
    delivery_status: DeliveryStatus
    checks: dict[str, CheckStatus]  # in the order the run reported them
    started_at: datetime
    finished_at: datetime
    duration_s: float
    result: dict[str, Any]
    findings: tuple[Finding, ...]


CONCLUSIVE = (DeliveryStatus.DELIVERED.value, DeliveryStatus.NOT_DELIVERED.value)


@dataclass(frozen=True)
class Listed:
    """A session with its verdict: the latest conclusive run, and the latest run beside it.

    An inconclusive run (a repository unmounted for a moment) never hides an earlier
    conclusive verdict; `latest_run` says it happened.
    """

    session: SessionRow
    verdict_run: RunRow | None
    latest_run: RunRow | None

    @property
    def delivery_status(self) -> str:
        """delivered, not_delivered, inconclusive, or never_verified."""
        if self.verdict_run is not None:
            return self.verdict_run.delivery_status.value
        return (
            "never_verified" if self.latest_run is None else self.latest_run.delivery_status.value
        )


@dataclass(frozen=True)
class Rates:
    """Counts over all sessions, each judged by its latest conclusive verdict.

    Both rates are over the `conclusive` sessions (delivered or not delivered) and
    are None when there is none; a sum divided once, never an average of rates.
    `silent_failures` are done but not delivered. Sessions only ever inconclusive,
    and sessions never verified, stand beside the rates and never count in them.
    """

    sessions: int
    done: int
    conclusive: int
    done_conclusive: int
    delivered: int
    not_delivered: int
    silent_failures: int
    inconclusive: int
    never_verified: int
    done_rate: float | None
    delivered_rate: float | None

    @classmethod
    def empty(cls) -> Rates:
        return cls(0, 0, 0, 0, 0, 0, 0, 0, 0, None, None)


class Store:
    """Sessions and their verification runs in one database."""

    def __init__(self, engine: Engine, read_only: bool = False) -> None:
        self._engine = engine
        self._read_only = read_only
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def open(cls, url: str, *, read_only: bool = False) -> Store:
        """Connect; migrate a SQLite database, require any other to be at head.

        `read_only` is for readers (``list``, ``show``, exports): the database is
        opened read-only (SQLite: ``mode=ro``, or ``immutable`` on a read-only
        mount), nothing is created or migrated, and a database behind this
        verifier is a clear error.
        """
        engine = make_engine(url, read_only=read_only)
        try:
            with _reachable(engine):
                if _stored_revisions(engine) == (HEAD_REVISION,):
                    pass
                elif engine.dialect.name == "sqlite" and not read_only:
                    _upgrade(engine)
                else:
                    _require_head(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, read_only)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def ingest(self, report: Report) -> tuple[SessionRow, bool]:
        """Store a report once; True when it is new.

        The same bytes again change nothing. Other bytes under a stored session id
        raise `SessionConflict` and the first report stands.
        """
        stored = self._find_session(report.session_id)
        if stored is None:
            try:
                return self._insert_session(report), True
            except IntegrityError:
                # Another writer stored this id between our read and our insert.
                stored = self._find_session(report.session_id)
                if stored is None:
                    raise
        if stored.report_sha256 != report.sha256:
            raise SessionConflict(report.session_id, stored.report_sha256, report.sha256)
        return stored, False

    def record_run(self, verification: Verification) -> int:
        """Append a run and its findings; earlier runs are never changed. Returns its id."""

        run = RunModel(
            session_id=verification.session_id,
            verifier_version=verification.verifier_version,
            delivery_status=verification.delivery_status.value,
            started_at=verification.started_at,
            finished_at=verification.finished_at,
            duration_s=(verification.finished_at - verification.started_at).total_seconds(),
            result=verification.to_dict(),
        )
        try:
            with self._transaction() as session:
                session.add(run)
                session.flush()
                session.add_all(
                    CheckResultModel(
                        run_id=run.id,
                        check_name=name,
                        ordinal=ordinal,
                        status=result.status.value,
                        duration_s=result.duration_s,
                    )
                    for ordinal, (name, result) in enumerate(verification.checks.items())
                )
                session.add_all(
                    _finding_model(run.id, name, ordinal, finding)
                    for name, result in verification.checks.items()
                    for ordinal, finding in enumerate(result.findings)
                )
                return run.id
        except IntegrityError:
            self.get_session(verification.session_id)  # NotFound when that is the cause
            raise

    def reject(
        self,
        raw: bytes,
        *,
        source: str,
        field: str,
        problem: str,
        sha256: str | None = None,
        size: int | None = None,
    ) -> int:
        """Keep the bytes of a report that could not be read, with why. Returns its id.

        `raw` may be only the first bytes of a report too large to hold: then
        `sha256` and `size` are those of the whole (by default, those of `raw`).
        """
        row = RejectedReportModel(
            source=source,
            field=field,
            problem=problem,
            report=raw,
            report_sha256=sha256 if sha256 is not None else hashlib.sha256(raw).hexdigest(),
            report_size=size if size is not None else len(raw),
        )
        with self._transaction() as session:
            session.add(row)
            session.flush()
            return row.id

    def get_session(self, session_id: str) -> SessionRow:
        stored = self._find_session(session_id)
        if stored is None:
            raise NotFound(f"session {session_id!r} is not stored")
        return stored

    def report_bytes(self, session_id: str) -> bytes:
        """The report exactly as it was received."""
        with self._transaction() as session:
            raw = session.scalar(
                select(SessionModel.report).where(SessionModel.session_id == session_id)
            )
        if raw is None:
            raise NotFound(f"session {session_id!r} is not stored")
        return raw

    def runs(self, session_id: str) -> list[RunRow]:
        """Every run of a session, oldest first."""
        with self._transaction() as session:
            if session.get(SessionModel, session_id) is None:
                raise NotFound(f"session {session_id!r} is not stored")
            runs = session.scalars(select(RunModel).where(RunModel.session_id == session_id))
            ids = select(RunModel.id).where(RunModel.session_id == session_id)
            return _run_rows(session, runs.all(), ids)

    def sessions(self) -> list[Listed]:
        """Every session with its verdict and its latest run, newest first."""
        verdicts = _latest_run_ids(conclusive=True)
        latest = _latest_run_ids()
        with self._transaction() as session:
            rows = session.execute(
                select(SessionModel, verdicts.c.run_id, latest.c.run_id)
                .outerjoin(verdicts, verdicts.c.session_id == SessionModel.session_id)
                .outerjoin(latest, latest.c.session_id == SessionModel.session_id)
                .order_by(SessionModel.started_at.desc(), SessionModel.session_id)
            ).all()
            wanted = {i for _, a, b in rows for i in (a, b) if i is not None}
            runs = session.scalars(select(RunModel).where(RunModel.id.in_(wanted))).all()
            ids = select(RunModel.id).where(RunModel.id.in_(wanted))
            by_id = {run.id: run for run in _run_rows(session, runs, ids)}
            return [
                Listed(
                    _session_row(s),
                    None if v is None else by_id[v],
                    None if last is None else by_id[last],
                )
                for s, v, last in rows
            ]

    def rates(self) -> Rates:
        """Done and delivered counts; each session judged by its latest conclusive verdict."""
        verdicts = _latest_run_ids(conclusive=True)
        latest = _latest_run_ids()
        verdict = RunModel.delivery_status
        conclusive = verdicts.c.run_id.is_not(None)
        with self._transaction() as session:
            row = session.execute(
                select(
                    func.count(SessionModel.session_id),
                    func.count().filter(SessionModel.done),
                    func.count().filter(conclusive),
                    func.count().filter(conclusive, SessionModel.done),
                    func.count().filter(verdict == DeliveryStatus.DELIVERED.value),
                    func.count().filter(verdict == DeliveryStatus.NOT_DELIVERED.value),
                    func.count().filter(
                        verdict == DeliveryStatus.NOT_DELIVERED.value, SessionModel.done
                    ),
                    func.count().filter(latest.c.run_id.is_(None)),
                )
                .outerjoin(verdicts, verdicts.c.session_id == SessionModel.session_id)
                .outerjoin(RunModel, RunModel.id == verdicts.c.run_id)
                .outerjoin(latest, latest.c.session_id == SessionModel.session_id)
            ).one()
        sessions, done, n, done_n, delivered, not_delivered, silent, never = row
        return Rates(
            sessions=sessions,
            done=done,
            conclusive=n,
            done_conclusive=done_n,
            delivered=delivered,
            not_delivered=not_delivered,
            silent_failures=silent,
            inconclusive=sessions - n - never,
            never_verified=never,
            done_rate=done_n / n if n else None,
            delivered_rate=delivered / n if n else None,
        )

    def blob_digests(self, blob_ids: Collection[str]) -> dict[str, str]:
        """The cached SHA-256 of those blobs that have one: blob id -> digest."""
        wanted = list(blob_ids)
        found: dict[str, str] = {}
        with self._transaction() as session:
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                rows = session.execute(
                    select(BlobDigestModel.blob_id, BlobDigestModel.sha256).where(
                        BlobDigestModel.blob_id.in_(chunk)
                    )
                )
                found.update((blob_id, digest) for blob_id, digest in rows)
        return found

    def add_blob_digests(self, digests: Mapping[str, str]) -> None:
        """Remember blob digests; one another writer stored first is left as it is."""
        if not digests or self._read_only:
            return
        known = set(self.blob_digests(digests))
        try:
            with self._transaction() as session:
                session.add_all(
                    BlobDigestModel(blob_id=b, sha256=d)
                    for b, d in digests.items()
                    if b not in known
                )
        except IntegrityError:
            pass  # another worker cached the same blob meanwhile: a content address, same value

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with _reachable(self._engine), self._sessions.begin() as session:
            yield session

    def _find_session(self, session_id: str) -> SessionRow | None:
        with self._transaction() as session:
            stored = session.get(SessionModel, session_id)
            return None if stored is None else _session_row(stored)

    def _insert_session(self, report: Report) -> SessionRow:
        doc = report.doc
        row = SessionModel(
            session_id=doc.session_id,
            agent_name=doc.agent.name,
            agent_version=doc.agent.version,
            agent_model=doc.agent.model,
            tool_profile=doc.agent.tool_profile,
            repo_name=doc.repo.name,
            base_commit=doc.repo.base_commit,
            head_commit=doc.repo.head_commit,
            raw_status=doc.status,
            status=report.status,
            done=report.done,
            started_at=doc.started_at,
            ended_at=doc.ended_at,
            report=report.raw,
            report_sha256=report.sha256,
        )
        with self._transaction() as session:
            session.add(row)
            session.flush()
            session.add_all(
                ClaimedChangeModel(
                    session_id=doc.session_id,
                    ordinal=ordinal,
                    path=change.path,
                    action=change.action,
                    sha256_before=change.sha256_before,
                    sha256_after=change.sha256_after,
                )
                for ordinal, change in enumerate(doc.changes)
            )
            return _session_row(row)


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for `url`; for SQLite, the file's folder is created and pragmas set.

    `read_only`: a SQLite file is opened with ``mode=ro`` (``immutable=1`` when even
    that fails, as on a read-only mount where no lock file can be made), never
    created; PostgreSQL sessions are ``default_transaction_read_only``.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        # The message of `exc` does not repeat the URL, which may hold a password.
        raise ConfigError(f"database URL is not valid: {exc}") from None
    try:
        if parsed.get_backend_name() != "sqlite":
            connect_args: dict[str, Any] = {}
            if parsed.get_backend_name() == "postgresql":
                connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
                if read_only:
                    connect_args["options"] = "-c default_transaction_read_only=on"
            return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
        if read_only:
            return _read_only_sqlite(parsed)
        engine = create_engine(parsed)
    except (NoSuchModuleError, ImportError) as exc:
        masked = parsed.render_as_string(hide_password=True)
        raise ConfigError(f"database URL {masked}: no driver for it ({exc})") from None
    database = parsed.database or ""
    if database not in ("", ":memory:") and not database.startswith("file:"):
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InfrastructureError(f"cannot create the folder of {database}: {exc}") from None
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _read_only_sqlite(parsed: URL) -> Engine:
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        raise ConfigError(f"a read-only store needs a SQLite file, not {database or 'memory'!r}")
    path = Path(database).resolve()
    if not path.is_file():
        raise NoStore(f"no store at {str(path)!r}: nothing has been stored there yet")

    def connect() -> sqlite3.Connection:
        uri = f"{path.as_uri()}?mode=ro"
        try:
            connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
            connection.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            # A WAL database on a read-only mount cannot make its shared-memory file.
            connection = sqlite3.connect(f"{uri}&immutable=1", uri=True, check_same_thread=False)
        connection.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        return connection

    return create_engine(f"sqlite:///{path}", creator=connect)


def alembic_config(connection: Connection | None = None) -> AlembicConfig:
    """The Alembic configuration of the store, built in code; `connection` is used if given."""
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@contextmanager
def migration_connection(engine: Engine) -> Iterator[Connection]:
    """A connection in one transaction for migrating, committed when the block succeeds.

    A lock is taken first so that two migrations of one database run one after
    the other: SQLite's write lock, PostgreSQL's transaction advisory lock. On
    SQLite, foreign keys are off while batch migrations copy and drop tables,
    and checked before commit.
    """
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        elif engine.dialect.name == "postgresql":
            connection.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK_ID)))
        try:
            yield connection
            if sqlite and connection.exec_driver_sql("PRAGMA foreign_key_check").first():
                raise ConfigError("migration left rows whose foreign keys do not resolve")
            connection.commit()
        finally:
            if sqlite:
                connection.rollback()
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")


def upgrade(url: str) -> None:
    """Migrate the database at `url` to the head revision (`verifier db upgrade`)."""
    engine = make_engine(url)
    try:
        with _reachable(engine):
            _upgrade(engine)
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at; None when it was never migrated."""
    engine = make_engine(url)
    try:
        with _reachable(engine):
            revisions = _stored_revisions(engine)
        return revisions[0] if revisions else None
    finally:
        engine.dispose()


def head_revision() -> str:
    """The revision this verifier's models correspond to, as Alembic finds it."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, f"no migration in {MIGRATIONS_DIR}"
    return head


def _upgrade(engine: Engine) -> None:
    from alembic import command
    from alembic.util import CommandError

    with migration_connection(engine) as connection, _ALEMBIC_COMMAND:
        try:
            command.upgrade(alembic_config(connection), "head")
        except CommandError as exc:
            raise ConfigError(
                f"cannot migrate database {_masked(engine)}: {exc} "
                "(was it migrated by a newer verifier?)"
            ) from None


def _stored_revisions(engine: Engine) -> tuple[str, ...]:
    """The revisions in Alembic's version table; empty when never migrated."""
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return ()
        rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    return tuple(sorted(row[0] for row in rows))


def _require_head(engine: Engine) -> None:
    current = _stored_revisions(engine)
    head = HEAD_REVISION
    if current != (head,):
        found = ", ".join(current) or "no revision (never migrated)"
        raise ConfigError(
            f"database {_masked(engine)} is at {found}, this verifier needs revision {head}: "
            "run `verifier db upgrade`"
        )


@contextmanager
def _reachable(engine: Engine) -> Iterator[None]:
    """Turn a database we cannot talk to into an `InfrastructureError`."""
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        reason = str(exc.orig).strip() or type(exc.orig).__name__
        raise InfrastructureError(f"database {_masked(engine)} cannot be used: {reason}") from exc


def _masked(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def _sqlite_pragmas(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in (f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}", "foreign_keys=ON", "journal_mode=WAL"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _latest_run_ids(conclusive: bool = False) -> Subquery:
    """Subquery (session_id, run_id) of each session's latest run (runs only ever grow),
    or, with `conclusive`, its latest delivered or not-delivered run."""
    query = select(RunModel.session_id, func.max(RunModel.id).label("run_id"))
    if conclusive:
        query = query.where(RunModel.delivery_status.in_(CONCLUSIVE))
    return query.group_by(RunModel.session_id).subquery()


def _session_row(model: SessionModel) -> SessionRow:
    return SessionRow(**{f.name: getattr(model, f.name) for f in dataclasses.fields(SessionRow)})


def _finding_model(run_id: int, check_name: str, ordinal: int, finding: Finding) -> FindingModel:
    return FindingModel(
        run_id=run_id,
        check_name=check_name,
        ordinal=ordinal,
        code=finding.code,
        message=finding.message,
        path=finding.path,
        expected=finding.expected,
        found=finding.found,
    )


def _run_rows(session: Session, runs: Sequence[RunModel], run_ids: Select[int]) -> list[RunRow]:
    """Frozen rows of `runs`, oldest first, with their checks and findings (`run_ids`
    selects them)."""
    findings: dict[int, list[FindingModel]] = {}
    for model in session.scalars(select(FindingModel).where(FindingModel.run_id.in_(run_ids))):
        findings.setdefault(model.run_id, []).append(model)
    checks: dict[int, list[CheckResultModel]] = {}
    for check in session.scalars(
        select(CheckResultModel).where(CheckResultModel.run_id.in_(run_ids))
    ):
        checks.setdefault(check.run_id, []).append(check)
    return [
        _run_row(run, checks.get(run.id, []), findings.get(run.id, []))
        for run in sorted(runs, key=lambda r: r.id)
    ]


def _run_row(run: RunModel, checks: list[CheckResultModel], findings: list[FindingModel]) -> RunRow:
    checks = sorted(checks, key=lambda c: c.ordinal)
    check_order = {c.check_name: c.ordinal for c in checks}
    findings = sorted(findings, key=lambda f: (check_order.get(f.check_name, 0), f.ordinal))
    return RunRow(
        id=run.id,
        session_id=run.session_id,
        verifier_version=run.verifier_version,
        delivery_status=DeliveryStatus(run.delivery_status),
        checks={c.check_name: CheckStatus(c.status) for c in checks},
        started_at=run.started_at,
        finished_at=run.finished_at,
        duration_s=run.duration_s,
        result=run.result,
        findings=tuple(Finding(f.code, f.message, f.path, f.expected, f.found) for f in findings),
    )
