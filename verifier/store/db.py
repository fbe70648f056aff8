"""The store: reports as received, and every verification run of them.

`Store.open(url)` connects to SQLite or PostgreSQL. A SQLite file is created and
migrated on first use; any other database must already be at the head revision
(`verifier db upgrade`), so that several workers never race to migrate it.
Callers get frozen rows (`SessionRow`, `RunRow`, `Counts`), never ORM objects.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    and_,
    create_engine,
    event,
    func,
    insert,
    inspect,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
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
from verifier.errors import (
    BadRequest,
    ConfigError,
    InfrastructureError,
    LostJob,
    NotFound,
    ReportPruned,
    SessionConflict,
)
from verifier.findings import CheckStatus, DeliveryStatus, Finding, Verification
from verifier.store.models import (
    BlobDigestModel,
    CheckResultModel,
    FindingModel,
    RejectedReportModel,
    RunModel,
    SessionCountModel,
    SessionModel,
    utcnow,
)

if TYPE_CHECKING:  # the contract's models load the google-genai SDK; the store never needs it
    from alembic.config import Config as AlembicConfig

    from verifier.contract.report import Report

MIGRATIONS_DIR = resources.migrations_dir()
# The newest migration. Opening a store that is already there needs no Alembic (whose
# import costs half a second of every command); a test keeps this equal to Alembic's head.
HEAD_REVISION = "0007"
GROUP_BY = ("day", "week", "agent", "model", "repo")
MAX_PAGE = 500
SQLITE_BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
MIGRATION_LOCK_ID = 0x7665_7269  # any constant: PostgreSQL advisory lock key for migrating
# Alembic's `context` and `op` are module-level proxies: one command per process at a time.
_ALEMBIC_COMMAND = threading.Lock()


class NoStore(NotFound):
    """A reader found no database where the configuration points: nothing stored yet."""

    code = "no_store"


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
    branch: str | None = None
    # pending (no run yet), delivered, not_delivered, inconclusive: see `Listed`.
    delivery_status: str = "pending"
    pruned_at: datetime | None = None
    # A person's override (`verifier.store.overrides`), shown beside the computed
    # verdict and never in place of it: delivered, not_delivered, or None.
    override_status: str | None = None


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
    # Why it ran (cli, ingest, reverify, retry, recheck), and the worker that ran it.
    reason: str | None = None
    worker: str | None = None


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
        """delivered, not_delivered, inconclusive (only ever inconclusive), or pending."""
        if self.verdict_run is not None:
            return self.verdict_run.delivery_status.value
        return "pending" if self.latest_run is None else self.latest_run.delivery_status.value

    @property
    def effective_status(self) -> str:
        """The override when one stands, else the computed `delivery_status`: what a
        merge gate decides on. The stats count the computed verdict only."""
        return self.session.override_status or self.delivery_status


@dataclass(frozen=True)
class Counts:
    """Sessions by state, each judged by its latest conclusive verdict.

    Both rates are over the conclusive sessions (delivered or not delivered) and
    are None when there is none: sums divided once, never averages of rates.
    `silent_failures` are done but not delivered. Sessions only ever inconclusive,
    and sessions not verified yet (`pending`), stand beside the rates.
    """

    total: int = 0
    done: int = 0
    delivered: int = 0
    not_delivered: int = 0
    inconclusive: int = 0
    pending: int = 0
    silent_failures: int = 0
    done_conclusive: int = 0

    @property
    def conclusive(self) -> int:
        return self.delivered + self.not_delivered

    @property
    def done_rate(self) -> float | None:
        return self.done_conclusive / self.conclusive if self.conclusive else None

    @property
    def delivered_rate(self) -> float | None:
        return self.delivered / self.conclusive if self.conclusive else None

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self))
        )

    @classmethod
    def of(cls, done: bool, delivery_status: str, sessions: int) -> Counts:
        """The counts of `sessions` sessions in one state."""
        delivered = delivery_status == "delivered"
        not_delivered = delivery_status == "not_delivered"
        return cls(
            total=sessions,
            done=sessions if done else 0,
            delivered=sessions if delivered else 0,
            not_delivered=sessions if not_delivered else 0,
            inconclusive=sessions if delivery_status == "inconclusive" else 0,
            pending=sessions if delivery_status == "pending" else 0,
            silent_failures=sessions if done and not_delivered else 0,
            done_conclusive=sessions if done and (delivered or not_delivered) else 0,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "done": self.done,
            "delivered": self.delivered,
            "not_delivered": self.not_delivered,
            "inconclusive": self.inconclusive,
            "pending": self.pending,
            "silent_failures": self.silent_failures,
            "conclusive": self.conclusive,
            "done_conclusive": self.done_conclusive,
            "done_rate": self.done_rate,
            "delivered_rate": self.delivered_rate,
        }


@dataclass(frozen=True)
class Group:
    """The counts of one group of `Store.stats`: a day (YYYY-MM-DD), a week (the
    ISO week's Monday), an agent, a model ('' for none) or a repository."""

    key: str
    counts: Counts


@dataclass(frozen=True)
class Stats:
    totals: Counts
    groups: list[Group] = field(default_factory=list)


@dataclass(frozen=True)
class SessionFilter:
    """What `Store.find_sessions` keeps; every field optional, all given must hold."""

    agent: str | None = None
    model: str | None = None
    repo: str | None = None
    agent_status: str | None = None
    done: bool | None = None
    delivery_status: str | None = None
    head_commit: str | None = None
    branch: str | None = None
    ended_from: datetime | None = None
    ended_to: datetime | None = None
    # Any of these (a merge gate's selections): session ids, head commits (full SHAs).
    session_ids: tuple[str, ...] | None = None
    head_commits: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Page:
    items: list[Listed]
    next_cursor: str | None


@dataclass(frozen=True)
class SessionLine:
    """A session as an export or a merge gate reads many: its row, its verdict, the
    verdict run's id and end, and the first finding of the run its verdict shows
    (the verdict run, else the latest), without loading runs, checks and findings."""

    session: SessionRow
    verdict_run_id: int | None
    verified_at: datetime | None
    first_finding_code: str | None
    # The run the verdict shows: the verdict run, else the latest (inconclusive) one.
    run_id: int | None = None

    @property
    def delivery_status(self) -> str:
        return self.session.delivery_status

    @property
    def effective_status(self) -> str:
        return self.session.override_status or self.session.delivery_status


@dataclass(frozen=True)
class RejectedRow:
    id: int
    received_at: datetime
    source: str
    field: str
    problem: str
    report_sha256: str
    report_size: int


DELIVERY_STATUSES = ("pending", "delivered", "not_delivered", "inconclusive")


class Store:
    """Sessions and their verification runs in one database."""

    def __init__(self, engine: Engine, read_only: bool = False) -> None:
        self._engine = engine
        self._read_only = read_only
        self._count_upsert = _count_upsert(engine.dialect.name)
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

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self._engine.dialect.name

    @property
    def url(self) -> str:
        """The database URL, password included: for this process's own connections only."""
        return self._engine.url.render_as_string(hide_password=False)

    def ingest(
        self,
        report: Report,
        *,
        on_insert: Callable[[Connection], None] | None = None,
    ) -> tuple[SessionRow, bool]:
        """Store a report once; True when it is new.

        The same bytes again change nothing. Other bytes under a stored session id
        raise `SessionConflict` and the first report stands. `on_insert` runs in the
        transaction that inserts a new session, after the row is written (the queue
        defers the session's job there, so that a report and its job commit together).
        """
        # Core statements on one connection, not the ORM's unit of work: a third of the
        # time per report (tests/benchmarks/store_ingest.py), and ingest is the hot path.
        try:
            with _reachable(self._engine), self._engine.begin() as connection:
                if self.dialect == "sqlite":
                    connection.exec_driver_sql("BEGIN IMMEDIATE")
                by_id = _SESSIONS.c.session_id == report.session_id
                if (
                    connection.execute(select(_SESSIONS.c.report_sha256).where(by_id)).first()
                    is None
                ):
                    row = self._insert_session(connection, report)
                    if on_insert is not None:
                        on_insert(connection)
                    return row, True
                found = connection.execute(select(*_SESSION_ROW_COLUMNS).where(by_id)).one()
                stored_row = SessionRow(**found._mapping)
        except IntegrityError:
            # Another writer (PostgreSQL) stored this id between our read and our insert.
            again = self._find_session(report.session_id)
            if again is None:
                raise
            stored_row = again
        if stored_row.report_sha256 != report.sha256:
            raise SessionConflict(report.session_id, stored_row.report_sha256, report.sha256)
        return stored_row, False

    def record_run(
        self,
        verification: Verification,
        *,
        reason: str | None = None,
        job_id: int | None = None,
        worker: str | None = None,
        guard: Callable[[Connection], bool] | None = None,
    ) -> int:
        """Append a run and its findings, and move the session to its new verdict, in
        one transaction; earlier runs are never changed. Returns the run's id.

        The session's row is locked first, so that two runs of one session are
        recorded one after the other. `guard` then runs in the same transaction: when
        it returns False (the worker no longer holds its job), nothing is written and
        `LostJob` is raised.
        """
        session_id = verification.session_id
        with self._transaction(write=True) as session:
            stored = session.scalars(
                select(SessionModel).where(SessionModel.session_id == session_id).with_for_update()
            ).one_or_none()
            if stored is None:
                raise NotFound(f"session {session_id!r} is not stored")
            if guard is not None and not guard(session.connection()):
                raise LostJob(
                    f"the verification of session {session_id!r} finished after its job "
                    f"{job_id} went to another worker: its result is discarded"
                )
            run = RunModel(
                session_id=session_id,
                verifier_version=verification.verifier_version,
                delivery_status=verification.delivery_status.value,
                started_at=verification.started_at,
                finished_at=verification.finished_at,
                duration_s=(verification.finished_at - verification.started_at).total_seconds(),
                result=verification.to_dict(),
                reason=reason,
                job_id=job_id,
                worker=worker,
            )
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
            self._move(session, stored, run)
            return run.id

    def _move(self, session: Session, stored: SessionModel, run: RunModel) -> None:
        """The session's verdict after `run`: a conclusive run is the verdict; an
        inconclusive one only when there was none. The counts follow."""
        before = stored.delivery_status
        stored.latest_run_id = run.id
        stored.verified_at = run.finished_at
        if run.delivery_status in CONCLUSIVE:
            stored.verdict_run_id = run.id
            after = run.delivery_status
        else:
            after = before if stored.verdict_run_id is not None else "inconclusive"
        if after != before:
            stored.delivery_status = after
            self._count(session, stored, before, -1)
            self._count(session, stored, after, +1)

    def _count(self, session: Session, stored: SessionModel, status: str, delta: int) -> None:
        """Add `delta` to the sessions counted in `status` for `stored`, in each dimension."""
        session.execute(
            self._count_upsert,
            _count_rows(
                stored.ended_at,
                stored.agent_name,
                stored.agent_model,
                stored.repo_name,
                stored.done,
                status,
                delta,
            ),
        )

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
            row = session.execute(
                select(SessionModel.report, SessionModel.pruned_at).where(
                    SessionModel.session_id == session_id
                )
            ).first()
        if row is None:
            raise NotFound(f"session {session_id!r} is not stored")
        if row.report is None:
            raise ReportPruned(session_id, row.pruned_at)
        return bytes(row.report)

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
        with self._transaction() as session:
            models = session.scalars(
                select(SessionModel).order_by(
                    SessionModel.started_at.desc(), SessionModel.session_id
                )
            ).all()
            return self._listed(session, models)

    def listed(self, session_id: str) -> Listed:
        """One session with its verdict and its latest run."""
        with self._transaction() as session:
            model = session.get(SessionModel, session_id)
            if model is None:
                raise NotFound(f"session {session_id!r} is not stored")
            return self._listed(session, [model])[0]

    def find_sessions(
        self,
        filters: SessionFilter | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """Sessions that pass `filters`, the latest ended first, `limit` at a time.

        The cursor is the position after the last session of a page (its end time
        and id): pages stay right while sessions are added.
        """
        filters = filters or SessionFilter()
        if not 1 <= limit <= MAX_PAGE:
            raise BadRequest("limit", f"must be between 1 and {MAX_PAGE}, got {limit}")
        conditions = _filter_conditions(filters)
        if cursor is not None:
            ended, last_id = _decode_cursor(cursor)
            conditions.append(
                or_(
                    SessionModel.ended_at < ended,
                    and_(SessionModel.ended_at == ended, SessionModel.session_id < last_id),
                )
            )
        with self._transaction() as session:
            models = session.scalars(
                select(SessionModel)
                .where(*conditions)
                .order_by(SessionModel.ended_at.desc(), SessionModel.session_id.desc())
                .limit(limit + 1)
            ).all()
            items = self._listed(session, models[:limit])
        more = len(models) > limit
        return Page(items, _encode_cursor(models[limit - 1]) if more else None)

    def session_lines(
        self, filters: SessionFilter | None = None, *, page: int = MAX_PAGE
    ) -> Iterator[SessionLine]:
        """Every session `filters` keep, newest ended first, as `SessionLine`s: read
        `page` at a time (one short transaction each, the position kept between them),
        so an export of a million sessions never holds more than a page."""
        filters = filters or SessionFilter()
        conditions = _filter_conditions(filters)
        position: tuple[datetime, str] | None = None
        while True:
            where = list(conditions)
            if position is not None:
                ended, last_id = position
                where.append(
                    or_(
                        SessionModel.ended_at < ended,
                        and_(SessionModel.ended_at == ended, SessionModel.session_id < last_id),
                    )
                )
            # Core on the connection, not ORM loading: these rows are plain tuples.
            with self._transaction() as session:
                connection = session.connection()
                rows = connection.execute(
                    select(
                        *_SESSION_ROW_COLUMNS, _SESSIONS.c.verdict_run_id, _SESSIONS.c.latest_run_id
                    )
                    .where(*where)
                    .order_by(SessionModel.ended_at.desc(), SessionModel.session_id.desc())
                    .limit(page)
                ).all()
                shown = {(r.verdict_run_id or r.latest_run_id) for r in rows} - {None}
                ended_at: dict[int, datetime] = {}
                first: dict[int, str] = {}
                if shown:
                    ended_at = {
                        run_id: finished
                        for run_id, finished in connection.execute(
                            select(RunModel.id, RunModel.finished_at).where(RunModel.id.in_(shown))
                        )
                    }
                    # The first finding of each run, in the order `_run_row` gives:
                    # by the check's position, then the finding's (one row per run).
                    rank = (
                        func.row_number()
                        .over(
                            partition_by=FindingModel.run_id,
                            order_by=(
                                func.coalesce(CheckResultModel.ordinal, 0),
                                FindingModel.ordinal,
                            ),
                        )
                        .label("rank")
                    )
                    ranked = (
                        select(FindingModel.run_id, FindingModel.code, rank)
                        .join(
                            CheckResultModel,
                            and_(
                                CheckResultModel.run_id == FindingModel.run_id,
                                CheckResultModel.check_name == FindingModel.check_name,
                            ),
                            isouter=True,
                        )
                        .where(FindingModel.run_id.in_(shown))
                        .subquery()
                    )
                    first = {
                        run_id: code
                        for run_id, code in connection.execute(
                            select(ranked.c.run_id, ranked.c.code).where(ranked.c.rank == 1)
                        )
                    }
            for r in rows:
                values = r._mapping
                run_id = r.verdict_run_id or r.latest_run_id
                yield SessionLine(
                    SessionRow(**{name: values[name] for name in _SESSION_ROW_NAMES}),
                    r.verdict_run_id,
                    None if r.verdict_run_id is None else ended_at.get(r.verdict_run_id),
                    None if run_id is None else first.get(run_id),
                    run_id,
                )
            if len(rows) < page:
                return
            position = (rows[-1].ended_at, rows[-1].session_id)

    def findings_of(self, run_ids: Collection[int]) -> dict[int, tuple[Finding, ...]]:
        """The findings of each of `run_ids`, in the order `runs` gives them (by the
        check's position, then the finding's); a run without findings is left out."""
        found: dict[int, list[Finding]] = {}
        ids = sorted(set(run_ids))
        with self._transaction() as session:
            connection = session.connection()
            for start in range(0, len(ids), MAX_PAGE):
                query = (
                    select(
                        FindingModel.run_id,
                        FindingModel.code,
                        FindingModel.message,
                        FindingModel.path,
                        FindingModel.expected,
                        FindingModel.found,
                    )
                    .join(
                        CheckResultModel,
                        and_(
                            CheckResultModel.run_id == FindingModel.run_id,
                            CheckResultModel.check_name == FindingModel.check_name,
                        ),
                        isouter=True,
                    )
                    .where(FindingModel.run_id.in_(ids[start : start + MAX_PAGE]))
                    .order_by(
                        FindingModel.run_id,
                        func.coalesce(CheckResultModel.ordinal, 0),
                        FindingModel.ordinal,
                    )
                )
                for run_id, code, message, path, expected, got in connection.execute(query):
                    found.setdefault(run_id, []).append(Finding(code, message, path, expected, got))
        return {run_id: tuple(items) for run_id, items in found.items()}

    def session_ids(self, delivery_status: str, *, limit: int = 1000) -> list[str]:
        """Ids of sessions whose current verdict is `delivery_status`, oldest ingested first;
        pruned sessions are left out (they cannot be verified again)."""
        if delivery_status not in DELIVERY_STATUSES:
            raise BadRequest("delivery_status", f"must be one of {', '.join(DELIVERY_STATUSES)}")
        with self._transaction() as session:
            return list(
                session.scalars(
                    select(SessionModel.session_id)
                    # A pruned session can never be verified again: offering it to the
                    # periodic work would fail each round, and fill its batch (oldest first).
                    .where(
                        SessionModel.delivery_status == delivery_status,
                        SessionModel.pruned_at.is_(None),
                    )
                    .order_by(SessionModel.ingested_at, SessionModel.session_id)
                    .limit(limit)
                )
            )

    def rates(self) -> Counts:
        """Done and delivered counts over every session."""
        return self.stats().totals

    def stats(
        self,
        *,
        day_from: date | None = None,
        day_to: date | None = None,
        group_by: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        repo: str | None = None,
    ) -> Stats:
        """Counts of the sessions that ended from `day_from` to `day_to` (both included,
        UTC days), in all and by `group_by` (day, week, agent, model, repo), of one
        agent, model ('' for none) or repository when given.

        Read from `session_counts`, never from the sessions, when at most one of agent,
        model and repo is given and the grouping is by time or by that same dimension:
        the cost is the number of days times the values of one dimension, whatever the
        number of sessions. Other combinations count the matching sessions themselves.
        """
        if group_by is not None and group_by not in GROUP_BY:
            raise BadRequest("group_by", f"must be one of {', '.join(GROUP_BY)}, got {group_by!r}")
        if day_from is not None and day_to is not None and day_from > day_to:
            raise BadRequest("from", f"{day_from} is after to={day_to}")
        wanted = {
            d: k for d, k in (("agent", agent), ("model", model), ("repo", repo)) if k is not None
        }
        if len(wanted) > 1 or (wanted and group_by not in (None, "day", "week", *wanted)):
            return self._stats_from_sessions(day_from, day_to, group_by, wanted)
        # Totals, days and weeks read the `all` rows; an agent breakdown the `agent` rows.
        if wanted:
            [(dimension, key)] = wanted.items()
        else:
            dimension = group_by if group_by in ("agent", "model", "repo") else "all"
            key = None
        keys = {
            None: [],
            "day": [SessionCountModel.day],
            "week": [SessionCountModel.day],
        }.get(group_by, [SessionCountModel.key])
        query = (
            select(
                *keys,
                SessionCountModel.done,
                SessionCountModel.delivery_status,
                func.sum(SessionCountModel.sessions),
            )
            .where(SessionCountModel.dimension == dimension)
            .group_by(*keys, SessionCountModel.done, SessionCountModel.delivery_status)
        )
        if key is not None:
            query = query.where(SessionCountModel.key == key)
        if day_from is not None:
            query = query.where(SessionCountModel.day >= day_from)
        if day_to is not None:
            query = query.where(SessionCountModel.day <= day_to)
        with self._transaction() as session:
            rows = session.execute(query).all()
        return _stats(group_by, ((*key, done, status, n) for *key, done, status, n in rows))

    def _stats_from_sessions(
        self,
        day_from: date | None,
        day_to: date | None,
        group_by: str | None,
        wanted: dict[str, str],
    ) -> Stats:
        """`stats` for filters `session_counts` cannot answer: one row per matching session."""
        columns = {"agent": SessionModel.agent_name, "model": SessionModel.agent_model}
        columns["repo"] = SessionModel.repo_name
        conditions = [
            (func.coalesce(columns[d], "") if d == "model" else columns[d]) == k
            for d, k in wanted.items()
        ]
        if day_from is not None:
            conditions.append(SessionModel.ended_at >= _day_start(day_from))
        if day_to is not None:
            conditions.append(SessionModel.ended_at < _day_start(day_to + timedelta(days=1)))
        keys = (
            []
            if group_by is None
            else [SessionModel.ended_at if group_by in ("day", "week") else columns[group_by]]
        )
        query = select(*keys, SessionModel.done, SessionModel.delivery_status).where(*conditions)
        with self._transaction() as session:
            rows = session.execute(query).all()

        def key_of(value: Any) -> Any:
            if group_by in ("day", "week"):
                return value.astimezone(UTC).date()
            return "" if value is None else value

        return _stats(group_by, ((*(key_of(k) for k in key), d, s, 1) for *key, d, s in rows))

    def rejected(self, *, limit: int = 50, before_id: int | None = None) -> list[RejectedRow]:
        """Reports that could not be read, newest first; `before_id` pages."""
        query = select(
            RejectedReportModel.id,
            RejectedReportModel.received_at,
            RejectedReportModel.source,
            RejectedReportModel.field,
            RejectedReportModel.problem,
            RejectedReportModel.report_sha256,
            RejectedReportModel.report_size,
        )
        if before_id is not None:
            query = query.where(RejectedReportModel.id < before_id)
        with self._transaction() as session:
            rows = session.execute(query.order_by(RejectedReportModel.id.desc()).limit(limit)).all()
        return [RejectedRow(*row) for row in rows]

    def rejected_bytes(self, rejected_id: int) -> bytes:
        """The bytes kept of a rejected report."""
        with self._transaction() as session:
            raw = session.scalar(
                select(RejectedReportModel.report).where(RejectedReportModel.id == rejected_id)
            )
        if raw is None:
            raise NotFound(f"rejected report {rejected_id} is not stored")
        return raw

    def _listed(self, session: Session, models: Sequence[SessionModel]) -> list[Listed]:
        wanted = {i for m in models for i in (m.verdict_run_id, m.latest_run_id) if i is not None}
        by_id: dict[int, RunRow] = {}
        if wanted:
            runs = session.scalars(select(RunModel).where(RunModel.id.in_(wanted))).all()
            ids = select(RunModel.id).where(RunModel.id.in_(wanted))
            by_id = {run.id: run for run in _run_rows(session, runs, ids)}
        return [
            Listed(
                _session_row(m),
                None if m.verdict_run_id is None else by_id[m.verdict_run_id],
                None if m.latest_run_id is None else by_id[m.latest_run_id],
            )
            for m in models
        ]

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
    def _transaction(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction. `write`: one that reads then writes; on SQLite it takes
        the write lock at once (BEGIN IMMEDIATE), as a reader that later writes can
        find its snapshot stale and fail instead of waiting."""
        with _reachable(self._engine), self._sessions.begin() as session:
            if write and self.dialect == "sqlite":
                session.connection().exec_driver_sql("BEGIN IMMEDIATE")
            yield session

    def _find_session(self, session_id: str) -> SessionRow | None:
        with self._transaction() as session:
            stored = session.get(SessionModel, session_id)
            return None if stored is None else _session_row(stored)

    def _insert_session(self, connection: Connection, report: Report) -> SessionRow:
        doc = report.doc
        values: dict[str, Any] = {
            "session_id": doc.session_id,
            "agent_name": doc.agent.name,
            "agent_version": doc.agent.version,
            "agent_model": doc.agent.model,
            "tool_profile": doc.agent.tool_profile,
            "repo_name": doc.repo.name,
            "base_commit": doc.repo.base_commit,
            "head_commit": doc.repo.head_commit,
            "branch": doc.repo.branch,
            "raw_status": doc.status,
            "status": report.status,
            "done": report.done,
            "started_at": doc.started_at,
            "ended_at": doc.ended_at,
            "report_sha256": report.sha256,
            "ingested_at": utcnow(),
            "delivery_status": "pending",
        }
        connection.execute(insert(_SESSIONS), {**values, "report": report.raw})
        if doc.changes:
            connection.execute(
                insert(_CLAIMED_CHANGES),
                [
                    {
                        "session_id": doc.session_id,
                        "ordinal": ordinal,
                        "path": _text(change.path),
                        "action": change.action,
                        "sha256_before": change.sha256_before,
                        "sha256_after": change.sha256_after,
                    }
                    for ordinal, change in enumerate(doc.changes)
                ],
            )
        connection.execute(
            self._count_upsert,
            _count_rows(
                doc.ended_at,
                doc.agent.name,
                doc.agent.model,
                doc.repo.name,
                report.done,
                "pending",
                1,
            ),
        )
        return SessionRow(**{k: v for k, v in values.items() if k in _SESSION_ROW_NAMES})


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


COUNT_KEY = ("day", "dimension", "key", "done", "delivery_status")


def _count_rows(
    ended_at: datetime,
    agent: str,
    model: str | None,
    repo: str,
    done: bool,
    status: str,
    delta: int,
) -> list[dict[str, Any]]:
    """The `session_counts` rows one session counts in: one per dimension."""
    day = ended_at.astimezone(UTC).date()
    keys = {"all": "", "agent": agent, "model": model or "", "repo": repo}
    return [
        {
            "day": day,
            "dimension": dimension,
            "key": key,
            "done": done,
            "delivery_status": status,
            "sessions": delta,
        }
        for dimension, key in keys.items()
    ]


def _stats(group_by: str | None, rows: Iterable[tuple[Any, ...]]) -> Stats:
    """Totals and groups of (group key..., done, delivery status, sessions) rows."""
    totals = Counts()
    groups: dict[str, Counts] = {}
    for row in rows:
        *key, done, status, n = row
        counts = Counts.of(bool(done), status, int(n or 0))
        totals += counts
        if key:
            name = _group_key(group_by, key[0])
            groups[name] = groups.get(name, Counts()) + counts
    return Stats(totals, [Group(k, c) for k, c in sorted(groups.items()) if c.total])


def _day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _group_key(group_by: str | None, value: Any) -> str:
    if group_by in ("day", "week"):
        day = value if isinstance(value, date) else date.fromisoformat(str(value))
        if group_by == "week":
            day -= timedelta(days=day.weekday())
        return day.isoformat()
    return str(value)


def _filter_conditions(filters: SessionFilter) -> list[ColumnElement[bool]]:
    if filters.delivery_status is not None and filters.delivery_status not in DELIVERY_STATUSES:
        raise BadRequest(
            "delivery_status",
            f"must be one of {', '.join(DELIVERY_STATUSES)}, got {filters.delivery_status!r}",
        )
    equal = {
        SessionModel.agent_name: filters.agent,
        SessionModel.agent_model: filters.model,
        SessionModel.repo_name: filters.repo,
        SessionModel.status: filters.agent_status,
        SessionModel.done: filters.done,
        SessionModel.delivery_status: filters.delivery_status,
        SessionModel.head_commit: filters.head_commit,
        SessionModel.branch: filters.branch,
    }
    conditions: list[ColumnElement[bool]] = [
        column == value for column, value in equal.items() if value is not None
    ]
    if filters.session_ids is not None:
        conditions.append(SessionModel.session_id.in_(filters.session_ids))
    if filters.head_commits is not None:
        conditions.append(SessionModel.head_commit.in_(filters.head_commits))
    for name, moment in (("from", filters.ended_from), ("to", filters.ended_to)):
        if moment is not None and (moment.tzinfo is None or moment.utcoffset() is None):
            raise BadRequest(name, f"{moment.isoformat()} has no UTC offset")
    if filters.ended_from is not None:
        conditions.append(SessionModel.ended_at >= filters.ended_from)
    if filters.ended_to is not None:
        conditions.append(SessionModel.ended_at < filters.ended_to)
    return conditions


def _encode_cursor(model: SessionModel) -> str:
    position = json.dumps([model.ended_at.astimezone(UTC).isoformat(), model.session_id])
    return base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        ended, session_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        moment = datetime.fromisoformat(ended)
        if moment.tzinfo is None or not isinstance(session_id, str) or "\x00" in session_id:
            raise ValueError("malformed position")
        moment = moment.astimezone(UTC)  # a time that overflows in UTC is no position of ours
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError) as exc:
        raise BadRequest("cursor", f"not a cursor this server gave out ({exc})") from None
    return moment, session_id


def _count_upsert(dialect: str) -> Any:
    """`session_counts` += `sessions` for one key, as one statement with bound values."""
    table = SessionModel.metadata.tables["session_counts"]
    statement = (pg_insert if dialect == "postgresql" else sqlite_insert)(table)
    return statement.on_conflict_do_update(
        index_elements=list(COUNT_KEY),
        set_={"sessions": table.c.sessions + statement.excluded.sessions},
    )


_SESSIONS = SessionModel.metadata.tables["sessions"]
_CLAIMED_CHANGES = SessionModel.metadata.tables["claimed_changes"]
_SESSION_ROW_NAMES = tuple(f.name for f in dataclasses.fields(SessionRow))
_SESSION_ROW_COLUMNS = tuple(_SESSIONS.c[name] for name in _SESSION_ROW_NAMES)


def _session_row(model: SessionModel) -> SessionRow:
    return SessionRow(**{f.name: getattr(model, f.name) for f in dataclasses.fields(SessionRow)})


def _text(value: str | None) -> str | None:
    """`value` for a text column: U+0000, which PostgreSQL text cannot hold, written as
    the four characters ``\\x00``. A claimed path may hold one (the changes check
    refuses it, naming it); the report's own bytes keep it as received."""
    return None if value is None else value.replace("\x00", "\\x00")


def _finding_model(run_id: int, check_name: str, ordinal: int, finding: Finding) -> FindingModel:
    return FindingModel(
        run_id=run_id,
        check_name=check_name,
        ordinal=ordinal,
        code=finding.code,
        message=_text(finding.message),
        path=_text(finding.path),
        expected=_text(finding.expected),
        found=_text(finding.found),
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
        reason=run.reason,
        worker=run.worker,
    )
