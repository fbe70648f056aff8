"""The `Store`: reports as received, and every verification run of them.

`Store.open(url)` connects to SQLite or PostgreSQL (`verifier.store.engine`): a
SQLite file is created and migrated on first use; any other database must
already be at the head revision (`verifier db upgrade`), so that several workers
never race to migrate it. Its methods are the queries of a session's life:
`ingest` a report once, `record_run` a verification, read sessions back
(`listed`, `find_sessions`, `session_lines`), their runs and findings, the
reports that could not be read, and the cached blob digests. Callers get frozen
rows (`verifier.store.rows`), never ORM objects. The counts behind `stats` are
kept by `verifier.store.stats`; tokens, overrides, webhooks and the witness
keep their tables through a `Store` in modules of their own.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    String,
    and_,
    bindparam,
    case,
    func,
    insert,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from verifier.errors import BadRequest, LostJob, NotFound, ReportPruned, SessionConflict
from verifier.findings import (
    DECIDING_RANK,
    OTHER_RANK,
    CheckStatus,
    DeliveryStatus,
    Finding,
    Verification,
)
from verifier.moments import utc_text
from verifier.store import stats as counting
from verifier.store.engine import at_head, make_engine, reachable
from verifier.store.models import (
    BlobDigestModel,
    CheckResultModel,
    ClaimedChangeModel,
    FindingModel,
    RejectedReportModel,
    RunModel,
    SessionModel,
    UTCDateTime,
    utcnow,
)
from verifier.store.rows import (
    CLAIMED_CHANGE_KEYS,
    CONCLUSIVE,
    DELIVERY_STATUSES,
    MAX_PAGE,
    Counts,
    FailureReason,
    Listed,
    Page,
    RejectedRow,
    RunRow,
    SessionFilter,
    SessionLine,
    SessionRow,
    Stats,
)

if TYPE_CHECKING:  # the contract's models load the google-genai SDK; the store never needs it
    from verifier.contract.report import Report


class Store:
    """Sessions and their verification runs in one database."""

    def __init__(self, engine: Engine, read_only: bool = False) -> None:
        self._engine = engine
        self._read_only = read_only
        self._count_upsert = counting.count_upsert(engine.dialect.name)
        self._insert_new = _insert_or_nothing(engine.dialect.name)
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._group = _GroupCommit(self._ingest_batch)
        # A read of one statement needs no transaction: on PostgreSQL no BEGIN and ROLLBACK
        # for it. (SQLite's driver begins none for a SELECT, and switching costs it more.)
        self._one_statement = (
            engine
            if engine.dialect.name == "sqlite"
            else engine.execution_options(isolation_level="AUTOCOMMIT")
        )

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
            at_head(engine, read_only=read_only)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, read_only)

    def close(self) -> None:
        """Close every connection of the store; it is not used after this."""
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
        # SQLite has one writer at a time: concurrent ingests wait for each other's commit
        # (and, in SQLite's busy handler, sleep a millisecond or more at each try). They
        # are committed together instead (`_GroupCommit`): each is answered once the
        # commit that holds it is on disk, as alone. PostgreSQL commits them side by side.
        if self.dialect == "sqlite":
            row, new = self._group.ingest(report, on_insert)
        else:
            with reachable(self._engine), self._engine.begin() as connection:
                row, new = self._ingest_in(connection, report, on_insert)
        if not new and row.report_sha256 != report.sha256:
            raise SessionConflict(report.session_id, row.report_sha256, report.sha256)
        return row, new

    def _ingest_in(
        self,
        connection: Connection,
        report: Report,
        on_insert: Callable[[Connection], None] | None,
    ) -> tuple[SessionRow, bool]:
        """`ingest`'s writes in `connection`'s transaction: the new row, or the stored one."""
        # Core statements built once, on one connection, not the ORM's unit of work: ingest
        # is the hot path (tests/benchmarks/store_ingest.py). The insert does nothing on a
        # stored id, which is then read: one statement fewer for a new report, the common
        # case, and no race with another writer of the same id (PostgreSQL waits for its
        # commit, then the read sees its row).
        row = self._insert_session(connection, report)
        if row is not None:
            if on_insert is not None:
                on_insert(connection)
            return row, True
        found = connection.execute(_STORED_ROW, {"session_id": report.session_id}).one()
        return SessionRow(**found._mapping), False

    def _ingest_batch(self, batch: Sequence[_Pending]) -> None:
        """The ingests of `batch` in one SQLite transaction, each pending given its outcome
        once it is committed. When the transaction fails, each is tried again alone, so
        that one ingest's error is its own (the others' writes were rolled back with it)."""
        try:
            with reachable(self._engine), self._engine.begin() as connection:
                connection.exec_driver_sql("BEGIN IMMEDIATE")
                outcomes = [self._ingest_in(connection, p.report, p.on_insert) for p in batch]
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error = exc
                return
            for pending in batch:
                self._ingest_batch([pending])
            return
        for pending, outcome in zip(batch, outcomes, strict=True):
            pending.outcome = outcome

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
        with self.transaction(write=True) as session:
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
            counting.count_rows(
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
        with self.transaction() as session:
            session.add(row)
            session.flush()
            return row.id

    def get_session(self, session_id: str) -> SessionRow:
        """The stored session `session_id`; `NotFound` when there is none."""
        stored = self._find_session(session_id)
        if stored is None:
            raise NotFound(f"session {session_id!r} is not stored")
        return stored

    def report_bytes(self, session_id: str) -> bytes:
        """The report exactly as it was received."""
        with self.transaction() as session:
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
        with self.transaction() as session:
            if session.get(SessionModel, session_id) is None:
                raise NotFound(f"session {session_id!r} is not stored")
            runs = session.scalars(select(RunModel).where(RunModel.session_id == session_id))
            ids = select(RunModel.id).where(RunModel.session_id == session_id)
            return _run_rows(session, runs.all(), ids)

    def sessions(self) -> list[Listed]:
        """Every session with its verdict and its latest run, newest first."""
        with self.transaction() as session:
            models = session.scalars(
                select(SessionModel).order_by(
                    SessionModel.started_at.desc(), SessionModel.session_id
                )
            ).all()
            return self._listed(session, models)

    def listed(self, session_id: str) -> Listed:
        """One session with its verdict and its latest run."""
        with self.transaction() as session:
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
            conditions += _after(_decode_cursor(cursor))
        with self.transaction() as session:
            models = session.scalars(
                select(SessionModel)
                .where(*conditions)
                .order_by(SessionModel.ended_at.desc(), SessionModel.session_id.desc())
                .limit(limit + 1)
            ).all()
            items = self._listed(session, models[:limit])
        more = len(models) > limit
        return Page(items, _encode_cursor(models[limit - 1]) if more else None)

    def count_sessions(self, filters: SessionFilter | None = None) -> int:
        """How many sessions pass `filters`: the length of every page of `find_sessions`."""
        conditions = _filter_conditions(filters or SessionFilter())
        with self.transaction() as session:
            counted = session.scalar(
                select(func.count()).select_from(SessionModel).where(*conditions)
            )
        return int(counted or 0)

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
            where = [*conditions, *_after(position)]
            # Core on the connection, not ORM loading: these rows are plain tuples.
            with self.transaction() as session:
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
                    # The finding that decided each run (`findings.deciding_finding`): a
                    # failed check's before an erring one's, then by the check's position
                    # and the finding's (one row per run).
                    rank = (
                        func.row_number()
                        .over(partition_by=FindingModel.run_id, order_by=_deciding_order())
                        .label("rank")
                    )
                    ranked = (
                        select(FindingModel.run_id, FindingModel.code, rank)
                        .join(CheckResultModel, _finding_check(), isouter=True)
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
        """The findings of each of `run_ids`, those that decide first
        (`findings.deciding_order`: a failed check's, then an erring one's, then the
        rest, each by the check's position, then the finding's), so the first is the
        deciding finding; a run without findings is left out."""
        found: dict[int, list[Finding]] = {}
        ids = sorted(set(run_ids))
        with self.transaction() as session:
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
                    .join(CheckResultModel, _finding_check(), isouter=True)
                    .where(FindingModel.run_id.in_(ids[start : start + MAX_PAGE]))
                    .order_by(FindingModel.run_id, *_deciding_order())
                )
                for run_id, code, message, path, expected, got in connection.execute(query):
                    found.setdefault(run_id, []).append(Finding(code, message, path, expected, got))
        return {run_id: tuple(items) for run_id, items in found.items()}

    def export_lines(
        self, filters: SessionFilter | None = None, *, page: int = MAX_PAGE
    ) -> Iterator[tuple[Any, ...]]:
        """Every session `filters` keep, newest ended first, as an export writes it: a tuple
        of `EXPORT_LINE` per session, its times as `utc_text` writes them, read `page` at
        a time in one query each (one short transaction, the position kept between them:
        what `session_lines` reads, without making typed rows of it)."""
        conditions = _filter_conditions(filters or SessionFilter())
        order = (SessionModel.ended_at.desc(), SessionModel.session_id.desc())
        # Two statements made once, the position bound: a page costs its query, not a
        # statement built and its cache key computed again (10-20 % of the CPU).
        first = _EXPORT_QUERY.where(*conditions).order_by(*order).limit(page)
        after = (
            _EXPORT_QUERY.where(
                *conditions,
                *_after((bindparam("ended", type_=UTCDateTime()), bindparam("last_id"))),
            )
            .order_by(*order)
            .limit(page)
        )
        position: dict[str, Any] | None = None
        while True:
            with self.transaction() as session:
                connection = session.connection()
                found = connection.execute(first if position is None else after, position)
                rows = found.all()
            for r in rows:
                yield (*r[:10], _utc(r[10]), _utc(r[11]), *r[12:16], _utc(r[16]), r[17], r[18])
            if len(rows) < page:
                return
            position = {"ended": _moment(rows[-1][11]), "last_id": rows[-1][0]}

    def session_ids(self, delivery_status: str, *, limit: int = 1000) -> list[str]:
        """Ids of sessions whose current verdict is `delivery_status`, oldest ingested first;
        pruned sessions are left out (they cannot be verified again)."""
        if delivery_status not in DELIVERY_STATUSES:
            raise BadRequest("delivery_status", f"must be one of {', '.join(DELIVERY_STATUSES)}")
        with self.transaction() as session:
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
        ended_from: datetime | None = None,
        ended_to: datetime | None = None,
        group_by: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        repo: str | None = None,
    ) -> Stats:
        """Counts of the sessions that ended from `ended_from` (included) to `ended_to`
        (excluded), in all and by `group_by`, of one agent, model or repository when
        given: `verifier.store.stats.stats`, which says how they are read."""
        return counting.stats(
            self.transaction,
            ended_from=ended_from,
            ended_to=ended_to,
            group_by=group_by,
            agent=agent,
            model=model,
            repo=repo,
        )

    def failure_reasons(self, filters: SessionFilter | None = None) -> list[FailureReason]:
        """The sessions `filters` keep, counted by the check and finding code of their
        shown run's findings: `verifier.store.stats.failure_reasons`. A row's count is
        the length of `find_sessions` with its check and code added to `filters`."""
        conditions = _filter_conditions(filters or SessionFilter())
        return counting.failure_reasons(self.transaction, conditions)

    def claimed_changes(self, session_id: str) -> list[dict[str, str | None]]:
        """The changes the session's report claimed, in its order, with the report's own
        keys (`CLAIMED_CHANGE_KEYS`); kept when the report is pruned."""
        with self.transaction() as session:
            models = session.scalars(
                select(ClaimedChangeModel)
                .where(ClaimedChangeModel.session_id == session_id)
                .order_by(ClaimedChangeModel.ordinal)
            ).all()
            return [{k: getattr(m, k) for k in CLAIMED_CHANGE_KEYS} for m in models]

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
        with self.transaction() as session:
            rows = session.execute(query.order_by(RejectedReportModel.id.desc()).limit(limit)).all()
        return [RejectedRow(*row) for row in rows]

    def rejected_bytes(self, rejected_id: int) -> bytes:
        """The bytes kept of a rejected report."""
        with self.transaction() as session:
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
        with self.transaction() as session:
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
            with self.transaction() as session:
                session.add_all(
                    BlobDigestModel(blob_id=b, sha256=d)
                    for b, d in digests.items()
                    if b not in known
                )
        except IntegrityError:
            pass  # another worker cached the same blob meanwhile: a content address, same value

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction, for the store's own modules (tokens, maintenance, stats,
        probes); the layers above call the Store's queries. `write`: one that reads
        then writes; on SQLite it takes the write lock at once (BEGIN IMMEDIATE), as a
        reader that later writes can find its snapshot stale and fail instead of waiting."""
        with reachable(self._engine), self._sessions.begin() as session:
            if write and self.dialect == "sqlite":
                session.connection().exec_driver_sql("BEGIN IMMEDIATE")
            yield session

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """One connection without the ORM, for the store's own modules' hot reads of one
        statement (the token of every request): a tenth of the CPU of a `transaction` on
        SQLite; on PostgreSQL in autocommit, half of that again (no BEGIN, no ROLLBACK)."""
        with reachable(self._engine), self._one_statement.connect() as connection:
            yield connection

    def _find_session(self, session_id: str) -> SessionRow | None:
        with self.transaction() as session:
            stored = session.get(SessionModel, session_id)
            return None if stored is None else _session_row(stored)

    def _insert_session(self, connection: Connection, report: Report) -> SessionRow | None:
        """Insert the report's session, its claimed changes and its counts; None (nothing
        written) when its session id is stored already."""
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
            "task_id": doc.task_id,
        }
        if connection.execute(self._insert_new, {**values, "report": report.raw}).rowcount != 1:
            return None
        if doc.changes:
            connection.execute(
                _INSERT_CHANGES,
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
            counting.count_rows(
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


def _filter_conditions(filters: SessionFilter) -> list[ColumnElement[bool]]:
    if filters.delivery_status is not None and filters.delivery_status not in DELIVERY_STATUSES:
        raise BadRequest(
            "delivery_status",
            f"must be one of {', '.join(DELIVERY_STATUSES)}, got {filters.delivery_status!r}",
        )
    equal = {
        SessionModel.agent_name: filters.agent,
        SessionModel.agent_model: filters.model or None,
        SessionModel.repo_name: filters.repo,
        SessionModel.status: filters.agent_status,
        SessionModel.done: filters.done,
        SessionModel.delivery_status: filters.delivery_status,
        SessionModel.head_commit: filters.head_commit,
        SessionModel.branch: filters.branch,
        SessionModel.task_id: filters.task,
    }
    conditions: list[ColumnElement[bool]] = [
        column == value for column, value in equal.items() if value is not None
    ]
    if filters.model == "":
        conditions.append(func.coalesce(SessionModel.agent_model, "") == "")
    if filters.session_ids is not None:
        conditions.append(SessionModel.session_id.in_(filters.session_ids))
    if filters.search:
        conditions.append(_searched(filters.search))
    if filters.check is not None:
        conditions.append(counting.has_finding(filters.check, filters.code))
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


def _after(position: tuple[Any, Any] | None) -> list[ColumnElement[bool]]:
    """The sessions after `position` (an end time and an id, or parameters bound to them)
    in the newest-first order of the pages: none to add at the start."""
    if position is None:
        return []
    ended, last_id = position
    return [
        or_(
            SessionModel.ended_at < ended,
            and_(SessionModel.ended_at == ended, SessionModel.session_id < last_id),
        )
    ]


def _searched(text: str) -> ColumnElement[bool]:
    """Sessions whose id or branch holds `text` (any case), or whose head or base commit
    starts with it: the dashboard's and the API's search."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    inside, start = f"%{escaped}%", f"{escaped.lower()}%"
    return or_(
        SessionModel.session_id.ilike(inside, escape="\\"),
        SessionModel.branch.ilike(inside, escape="\\"),
        SessionModel.head_commit.like(start, escape="\\"),
        SessionModel.base_commit.like(start, escape="\\"),
    )


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


_SESSIONS = SessionModel.metadata.tables["sessions"]
_CLAIMED_CHANGES = SessionModel.metadata.tables["claimed_changes"]
_SESSION_ROW_NAMES = tuple(f.name for f in dataclasses.fields(SessionRow))
_SESSION_ROW_COLUMNS = tuple(_SESSIONS.c[name] for name in _SESSION_ROW_NAMES)
_STORED_ROW = select(*_SESSION_ROW_COLUMNS).where(_SESSIONS.c.session_id == bindparam("session_id"))
_INSERT_CHANGES = insert(_CLAIMED_CHANGES)


def _insert_or_nothing(dialect: str) -> Any:
    """A session's insert that writes nothing when its session id is stored (rowcount 0)."""
    statement = counting.dialect_insert(dialect, _SESSIONS)
    # preserve_rowcount: SQLAlchemy keeps the driver's rowcount of an INSERT only when asked.
    return statement.on_conflict_do_nothing(
        index_elements=[_SESSIONS.c.session_id]
    ).execution_options(preserve_rowcount=True)


# What `Store.export_lines` gives of a session, in this order (the export's column names).
EXPORT_LINE = (
    "session_id",
    "agent",
    "agent_version",
    "model",
    "repo",
    "base_commit",
    "head_commit",
    "branch",
    "agent_status",
    "done",
    "started_at",
    "ended_at",
    "delivery_status",
    "override_status",
    "effective_status",
    "verdict_run_id",
    "verified_at",
    "first_finding_code",
    "report_sha256",
)


def _stored_moment(column: Any) -> Any:
    """A time column as the driver gives it (SQLite's text, PostgreSQL's datetime): an
    export turns it into text itself (`_utc`), far cheaper than through `UTCDateTime`."""
    return type_coerce(column, String)


def _export_query() -> Select[Any]:
    s, verdict_run = _SESSIONS, RunModel.__table__
    # The finding that decided the shown run (the verdict run, else the latest): as
    # `session_lines` picks it, one row per session.
    first_finding = (
        select(FindingModel.code)
        .join(CheckResultModel, _finding_check(), isouter=True)
        .where(FindingModel.run_id == func.coalesce(s.c.verdict_run_id, s.c.latest_run_id))
        .order_by(*_deciding_order())
        .limit(1)
        .correlate(s)
        .scalar_subquery()
    )
    return select(
        s.c.session_id,
        s.c.agent_name,
        s.c.agent_version,
        s.c.agent_model,
        s.c.repo_name,
        s.c.base_commit,
        s.c.head_commit,
        s.c.branch,
        s.c.status,
        s.c.done,
        _stored_moment(s.c.started_at),
        _stored_moment(s.c.ended_at),
        s.c.delivery_status,
        s.c.override_status,
        func.coalesce(s.c.override_status, s.c.delivery_status),
        s.c.verdict_run_id,
        _stored_moment(verdict_run.c.finished_at),
        first_finding,
        s.c.report_sha256,
    ).select_from(s.outerjoin(verdict_run, verdict_run.c.id == s.c.verdict_run_id))


def _utc(value: str | datetime | None) -> str | None:
    """A stored time as `utc_text` writes it: SQLite's text (``2026-11-30 12:00:00.000001``,
    as SQLAlchemy writes a UTC time there) cut and joined, anything else parsed first."""
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) == 26 and value[10] == " " and value[19] == ".":
            fraction = value[20:]
            end = "Z" if fraction == "000000" else f".{fraction}Z"
            return f"{value[:10]}T{value[11:19]}{end}"
        return utc_text(_moment(value))
    return utc_text(value)


def _moment(value: str | datetime) -> datetime:
    """A stored time, aware and in UTC (as `UTCDateTime` reads it)."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


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


def _finding_check() -> ColumnElement[bool]:
    """A finding's check result in its run: what `_deciding_order` ranks it by."""
    return and_(
        CheckResultModel.run_id == FindingModel.run_id,
        CheckResultModel.check_name == FindingModel.check_name,
    )


def _deciding_order() -> tuple[Any, ...]:
    """The SQL order of a run's findings that puts the deciding one first: the rank of its
    check's status (`findings.DECIDING_RANK`), the check's position, the finding's."""
    return (
        case(DECIDING_RANK, value=CheckResultModel.status, else_=OTHER_RANK),
        func.coalesce(CheckResultModel.ordinal, 0),
        FindingModel.ordinal,
    )


_EXPORT_QUERY = _export_query()


class _Pending:
    """One ingest waiting in a `_GroupCommit`: its outcome (or error) once committed."""

    __slots__ = ("done", "error", "on_insert", "outcome", "report")

    def __init__(self, report: Report, on_insert: Callable[[Connection], None] | None) -> None:
        self.report = report
        self.on_insert = on_insert
        self.done = threading.Event()
        self.outcome: tuple[SessionRow, bool] | None = None
        self.error: BaseException | None = None


class _GroupCommit:
    """Ingests from several threads committed together: SQLite's group commit.

    A thread that finds no commit under way leads: it takes every ingest waiting (up
    to `MAX_BATCH`) and commits them in one transaction, then hands the lead to the
    first that arrived meanwhile, and returns. The others wait until the commit that
    holds theirs is done, so an ingest returns, as alone, only once its report is on
    disk (``synchronous=FULL``). Alone, an ingest is its own batch of one.
    """

    MAX_BATCH = 64

    def __init__(self, commit: Callable[[Sequence[_Pending]], None]) -> None:
        self._commit = commit
        self._lock = threading.Lock()
        self._waiting: list[_Pending] = []
        self._leading = False

    def ingest(
        self, report: Report, on_insert: Callable[[Connection], None] | None
    ) -> tuple[SessionRow, bool]:
        mine = _Pending(report, on_insert)
        with self._lock:
            self._waiting.append(mine)
            lead = not self._leading
            self._leading = True
        if not lead:
            mine.done.wait()
        if mine.outcome is None and mine.error is None:  # handed the lead
            self._lead()
        if mine.error is not None:
            raise mine.error
        assert mine.outcome is not None
        return mine.outcome

    def _lead(self) -> None:
        with self._lock:
            batch = self._waiting[: self.MAX_BATCH]
            del self._waiting[: self.MAX_BATCH]
        try:
            self._commit(batch)
        except BaseException as exc:  # an interrupt: no ingest of the batch is answered
            for pending in batch:
                if pending.outcome is None and pending.error is None:
                    pending.error = exc
            raise
        finally:
            for pending in batch:
                pending.done.set()
            with self._lock:
                if self._waiting:
                    self._waiting[0].done.set()  # the next leader
                else:
                    self._leading = False
