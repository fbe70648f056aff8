"""Keeping a store for years: pruning old evidence, and moving to PostgreSQL.

Plumbing for two administrative commands, apart from the store's daily work:

- `prune` drops what is large and no longer needed to stand behind a verdict:
  the raw report bytes of sessions that ended before a date, and the test
  output kept in their runs. Verdicts, findings, check statuses and every hash
  (`report_sha256`, the test output's `output_sha256`) stay, so a verdict can
  still be shown and a copy of the evidence kept elsewhere still checked
  against it; the bytes themselves are gone, so such a session can never be
  verified again from the store. Sessions never verified keep their report.
- `copy_store` copies an embedded SQLite store into an empty PostgreSQL database
  at the head revision, table by table in foreign-key order, in one target
  transaction, and checks the copy before committing it: row counts and a
  SHA-256 of each table's rows in primary-key order, on both sides, and every
  report's bytes against its `report_sha256`. A copy that does not match is
  rolled back, leaving the target as empty as it was found.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Engine,
    Table,
    bindparam,
    event,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.types import Integer, String, Text

from verifier.errors import BadRequest, ConfigError, InfrastructureError
from verifier.moments import parse_moment, utc_text
from verifier.store.db import Store
from verifier.store.engine import make_engine, masked, reachable, upgrade
from verifier.store.models import Base

Progress = Callable[[str], None]

# What a run keeps of the test command's output: `details.output_excerpt` of a check
# (verifier/checks/tests/check.py, `_details`); its `output_sha256` and `output_bytes` stay.
TEST_LOG_KEYS = ("output_excerpt",)
PRUNE_BATCH = 200  # sessions per transaction: a server writing meanwhile waits that long at most
COPY_BATCH_ROWS = 1000
COPY_BATCH_BYTES = 32 * 1024 * 1024  # reports are up to 20 MB each: batch by size as well
PROGRESS_EVERY_S = 2.0
# Tables a target database may hold besides ours: Alembic's, and the job queue's (0005).
FOREIGN_TABLE_PREFIXES = ("alembic_version", "procrastinate_")
SESSIONS = Base.metadata.tables["sessions"]
RUNS = Base.metadata.tables["verification_runs"]


class CopyMismatch(InfrastructureError):
    """The copy read back from the target is not what was read from the source."""

    code = "copy_mismatch"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        shown = "; ".join(problems[:5]) + (
            f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        )
        super().__init__(f"the copy does not match its source, so it was rolled back: {shown}")


# Pruning.


@dataclass(frozen=True)
class PrunePlan:
    """What `prune` would do now: counted before anything changes, for the confirmation."""

    before: datetime
    sessions: int  # reports to drop
    report_bytes: int
    runs: int  # runs of those sessions, whose test output goes with them
    kept_unverified: int  # ended before the date but never verified: their report is kept


@dataclass(frozen=True)
class PruneResult:
    """What a `prune` did, as its admin log entry (`admin_log_id`) records it."""

    before: datetime
    pruned_at: datetime
    sessions: int
    report_bytes: int
    runs: int  # runs whose test output was dropped
    log_bytes: int  # UTF-8 bytes of that output
    kept_unverified: int
    admin_log_id: int

    @property
    def bytes_freed(self) -> int:
        """Report bytes and test output bytes dropped, together."""
        return self.report_bytes + self.log_bytes

    def to_dict(self) -> dict[str, Any]:
        """The result as ``verifier prune --format json`` prints it (times in UTC)."""
        data = asdict(self)
        data["before"] = utc_text(self.before)
        data["pruned_at"] = utc_text(self.pruned_at)
        data["bytes_freed"] = self.bytes_freed
        return data


def parse_cutoff(value: str, now: datetime, field: str = "--before") -> datetime:
    """A moment (`verifier.moments.parse_moment`) not after `now`."""
    cutoff = parse_moment(value, field)
    if cutoff > now:
        raise BadRequest(
            field, f"{value!r} is in the future: only sessions that have ended can be pruned"
        )
    return cutoff


def _prunable(before: datetime) -> ColumnElement[bool]:
    """Sessions that ended before `before`, verified at least once, not pruned yet."""
    return (
        (SESSIONS.c.ended_at < before)
        & SESSIONS.c.pruned_at.is_(None)
        & (SESSIONS.c.delivery_status != "pending")
    )


def plan_prune(store: Store, before: datetime) -> PrunePlan:
    """Count what `prune(store, before)` would drop; changes nothing."""
    with store.transaction() as session:
        sessions, report_size = session.execute(
            select(func.count(), func.coalesce(func.sum(func.length(SESSIONS.c.report)), 0))
            .select_from(SESSIONS)
            .where(_prunable(before))
        ).one()
        runs = session.scalar(
            select(func.count())
            .select_from(RUNS.join(SESSIONS, SESSIONS.c.session_id == RUNS.c.session_id))
            .where(_prunable(before))
        )
    return PrunePlan(before, sessions, int(report_size), runs or 0, _unverified(store, before))


def _unverified(store: Store, before: datetime) -> int:
    """Sessions that ended before `before` and were never verified: they keep their report."""
    with store.transaction() as session:
        count = session.scalar(
            select(func.count())
            .select_from(SESSIONS)
            .where(
                (SESSIONS.c.ended_at < before)
                & SESSIONS.c.pruned_at.is_(None)
                & (SESSIONS.c.delivery_status == "pending")
            )
        )
    return count or 0


def prune(
    store: Store,
    before: datetime,
    *,
    actor: str,
    progress: Progress | None = None,
    batch: int = PRUNE_BATCH,
    now: datetime | None = None,
) -> PruneResult:
    """Drop the report bytes and test output of sessions that ended before `before`.

    Sessions are taken `batch` at a time, each batch in one transaction: its
    sessions are marked first (that takes the write lock on SQLite and the rows'
    locks on PostgreSQL, so a run recorded meanwhile waits), then their runs'
    test output is dropped, then their reports. A prune interrupted halfway
    leaves whole sessions pruned or untouched; running it again finishes it.
    The act is appended to the admin log with what was dropped, even when it
    was interrupted (``complete`` says so).
    """
    pruned_at = (now or datetime.now(UTC)).astimezone(UTC)
    kept = _unverified(store, before)
    totals = {"sessions": 0, "report_bytes": 0, "runs": 0, "log_bytes": 0}

    def log(complete: bool) -> int:
        detail = {
            "before": utc_text(before),
            "pruned_at": utc_text(pruned_at),
            **totals,
            "kept_unverified": kept,
            "complete": complete,
        }
        return _append_admin_log(store, actor=actor, action="store.prune", detail=detail)

    try:
        while done := _prune_batch(store, before, pruned_at, batch):
            for key, value in done.items():
                totals[key] += value
            if progress is not None:
                progress(f"pruned {totals['sessions']:,} sessions, {totals['runs']:,} runs")
    except BaseException:
        if totals["sessions"]:
            # What was dropped before the interruption is gone for good: say so in the log,
            # unless the database itself is what failed.
            with suppress(InfrastructureError):
                log(complete=False)
        raise
    log_id = log(complete=True)
    return PruneResult(
        before=before,
        pruned_at=pruned_at,
        sessions=totals["sessions"],
        report_bytes=totals["report_bytes"],
        runs=totals["runs"],
        log_bytes=totals["log_bytes"],
        kept_unverified=kept,
        admin_log_id=log_id,
    )


def _prune_batch(
    store: Store, before: datetime, pruned_at: datetime, batch: int
) -> dict[str, int] | None:
    """Prune up to `batch` sessions in one transaction; None when none was left."""
    marked = SESSIONS.c.pruned_at == pruned_at
    with store.transaction(write=True) as session:
        connection = session.connection()
        ids = select(SESSIONS.c.session_id).where(_prunable(before)).limit(batch)
        # A write first: it takes SQLite's write lock, and the rows' locks on PostgreSQL.
        count = connection.execute(
            update(SESSIONS)
            .where(SESSIONS.c.session_id.in_(ids.scalar_subquery()))
            .values(pruned_at=pruned_at)
        ).rowcount
        if not count:
            return None
        rows = connection.execute(
            select(SESSIONS.c.session_id, func.length(SESSIONS.c.report)).where(
                marked & SESSIONS.c.report.is_not(None)
            )
        ).all()
        runs, log_bytes = _strip_runs(connection, [r[0] for r in rows])
        connection.execute(update(SESSIONS).where(marked).values(report=None))
    return {
        "sessions": count,
        "report_bytes": sum(int(r[1] or 0) for r in rows),
        "runs": runs,
        "log_bytes": log_bytes,
    }


def _strip_runs(connection: Connection, session_ids: list[str]) -> tuple[int, int]:
    """Drop the test output of these sessions' runs; (runs changed, bytes dropped)."""
    changed: list[dict[str, Any]] = []
    dropped = 0
    for run_id, result in connection.execute(
        select(RUNS.c.id, RUNS.c.result).where(RUNS.c.session_id.in_(session_ids))
    ):
        stripped, size = strip_test_logs(result)
        if size:
            changed.append({"run_id": run_id, "stripped": stripped})
            dropped += size
    if changed:
        connection.execute(
            update(RUNS)
            .where(RUNS.c.id == bindparam("run_id"))
            .values(result=bindparam("stripped", type_=RUNS.c.result.type)),
            changed,
        )
    return len(changed), dropped


def strip_test_logs(result: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """A run's result without the test output; the UTF-8 bytes dropped (0: nothing to drop).

    Only the output goes: statuses, findings, counts, and the output's SHA-256
    and size stay, so the verdict reads the same and a kept log can be checked.
    """
    checks = result.get("checks")
    if not isinstance(checks, dict):
        return result, 0
    dropped = 0
    new_checks: dict[str, Any] = {}
    for name, check in checks.items():
        details = check.get("details") if isinstance(check, dict) else None
        if isinstance(details, dict) and any(
            isinstance(details.get(k), str) and details[k] for k in TEST_LOG_KEYS
        ):
            details = dict(details)
            for key in TEST_LOG_KEYS:
                value = details.get(key)
                if isinstance(value, str) and value:
                    dropped += len(value.encode("utf-8"))
                    details[key] = None
            check = {**check, "details": details}
        new_checks[name] = check
    if not dropped:
        return result, 0
    return {**result, "checks": new_checks}, dropped


def _append_admin_log(store: Store, *, actor: str, action: str, detail: dict[str, Any]) -> int:
    from verifier.store.tokens import log_admin

    return log_admin(store, actor=actor, action=action, detail=detail).id


# Copying an embedded store to PostgreSQL.


@dataclass(frozen=True)
class TableCopy:
    """One table copied: its rows, and the hash both sides agreed on."""

    table: str
    rows: int
    sha256: str  # over the rows in primary-key order, the same on both sides


@dataclass(frozen=True)
class CopyResult:
    """A copy that was checked and committed: every table, and the reports read back."""

    source: str  # URLs with their password masked
    target: str
    tables: tuple[TableCopy, ...]
    reports_checked: int  # report bytes read back from the target and hashed
    reports_pruned: int  # sessions whose report was pruned: nothing to check
    pending: int  # sessions never verified, to queue on the target
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """The result as ``verifier db copy --format json`` prints it."""
        data = asdict(self)
        data["verified"] = True
        data["seconds"] = round(self.seconds, 3)
        return data


def copy_store(
    source_url: str,
    target_url: str,
    *,
    progress: Progress | None = None,
    batch_rows: int = COPY_BATCH_ROWS,
    batch_bytes: int = COPY_BATCH_BYTES,
) -> CopyResult:
    """Copy the SQLite store at `source_url` into the empty PostgreSQL database at `target_url`.

    1. the source must be a SQLite store at head, the target a PostgreSQL
       database with none of our rows and no tables of anyone else;
    2. migrate the target to head (`verifier.store.upgrade`);
    3. in one transaction on each side (a snapshot of the source, so that a
       server still writing to it changes nothing of the copy): copy every
       table of the models in foreign-key order, in batches, hashing each row
       as it is read;
    4. set the target's id sequences past the copied ids;
    5. read the target back in the same transaction: row counts and hashes
       must equal the source's, and each report must hash to its
       `report_sha256`; then commit, or roll back and raise `CopyMismatch`.
    """
    started = time.monotonic()
    say = progress or (lambda _line: None)
    _require_backends(source_url, target_url)
    with Store.open(source_url, read_only=True):
        pass  # the source exists and is at head: a clear error otherwise
    source = make_engine(source_url, read_only=True)
    _snapshot_reads(source)
    target = make_engine(target_url)
    try:
        with reachable(target):
            _require_empty(target)  # before migrating: never add our tables to another's database
        say(f"migrating {masked(target)} to the head revision")
        upgrade(target_url)
        tables = list(Base.metadata.sorted_tables)
        with reachable(source, target), source.connect() as src, target.begin() as dst:
            # Raising inside the block rolls the target back: it stays empty.
            copied = [_copy_table(src, dst, t, say, batch_rows, batch_bytes) for t in tables]
            src.rollback()  # the snapshot's end: the source was only read
            _reset_sequences(dst, tables)
            problems = _compare(dst, tables, copied, say)
            checked, pruned, bad = _check_reports(dst, say)
            if problems + bad:
                raise CopyMismatch(problems + bad)
            pending = dst.scalar(
                select(func.count())
                .select_from(SESSIONS)
                .where(SESSIONS.c.delivery_status == "pending")
            )
    finally:
        source.dispose()
        target.dispose()
    return CopyResult(
        source=masked(source),
        target=masked(target),
        tables=tuple(copied),
        reports_checked=checked,
        reports_pruned=pruned,
        pending=pending or 0,
        seconds=time.monotonic() - started,
    )


def _require_backends(source_url: str, target_url: str) -> None:
    source = make_url(source_url)
    if source.get_backend_name() != "sqlite":
        raise ConfigError(
            f"database_url: {source.render_as_string(hide_password=True)} is not an embedded "
            "SQLite store; `db copy` moves a SQLite store to PostgreSQL"
        )
    try:
        target = make_url(target_url)
    except ArgumentError:
        raise ConfigError(
            "--to: not a database URL: give postgresql+psycopg://user@host/db"
        ) from None
    if target.get_backend_name() != "postgresql":
        raise ConfigError(
            f"--to: {target.render_as_string(hide_password=True)} is not a PostgreSQL URL: "
            "give postgresql+psycopg://user@host/db"
        )


def _snapshot_reads(engine: Engine) -> None:
    """Make a connection's reads one snapshot: pysqlite opens no transaction for a SELECT.

    With the driver's own transaction handling off, SQLAlchemy's begin emits
    BEGIN, and every read until the end of the block sees the same database
    (WAL keeps it for us while a server writes on).
    """

    def autocommit_driver(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None

    def begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN")

    event.listen(engine, "connect", autocommit_driver)
    event.listen(engine, "begin", begin)


class _Hasher:
    """SHA-256 over rows, each value tagged with its type, so that no two rows encode alike."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def add(self, row: Sequence[Any]) -> None:
        feed = self._hash.update
        feed(b"R")
        for value in row:
            feed(_encode(value))
        self.rows += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _encode(value: Any) -> bytes:
    if value is None:
        return b"N;"
    if isinstance(value, bool):
        return b"T;" if value else b"F;"
    if isinstance(value, int):
        return b"I%d;" % value
    if isinstance(value, float):
        return b"F" + value.hex().encode() + b";"
    if isinstance(value, datetime):
        return b"D" + value.astimezone(UTC).isoformat().encode() + b";"
    if isinstance(value, date):
        return b"d" + value.isoformat().encode() + b";"
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return b"B%d:" % len(raw) + raw
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return b"S%d:" % len(raw) + raw
    raw = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    return b"J%d:" % len(raw) + raw


def _ordered(table: Table, dialect: str) -> Any:
    """`table`'s rows in primary-key order; strings in code point order on both engines
    (SQLite compares bytes; PostgreSQL would use the database's collation)."""
    keys: list[Any] = []
    for column in table.primary_key.columns:
        if dialect == "postgresql" and isinstance(column.type, (String, Text)):
            keys.append(column.collate("C"))
        else:
            keys.append(column)
    return select(table).order_by(*keys)


def _copy_table(
    src: Connection,
    dst: Connection,
    table: Table,
    say: Progress,
    batch_rows: int,
    batch_bytes: int,
) -> TableCopy:
    total = src.scalar(select(func.count()).select_from(table)) or 0
    say(f"copying {table.name}: {total:,} rows")
    hasher = _Hasher()
    last = time.monotonic()
    rows = src.execution_options(yield_per=batch_rows).execute(_ordered(table, "sqlite"))
    for chunk in _batches(rows, batch_rows, batch_bytes):
        for row in chunk:
            hasher.add(row)
        dst.execute(insert(table), [dict(row._mapping) for row in chunk])
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            say(f"copying {table.name}: {hasher.rows:,} / {total:,} rows")
    return TableCopy(table.name, hasher.rows, hasher.hexdigest())


def _batches(rows: Iterable[Any], max_rows: int, max_bytes: int) -> Iterator[list[Any]]:
    """Rows in lists of at most `max_rows`, or fewer once their bytes and text reach `max_bytes`."""
    chunk: list[Any] = []
    size = 0
    for row in rows:
        chunk.append(row)
        size += sum(len(v) for v in row if isinstance(v, (bytes, str)))
        if len(chunk) >= max_rows or size >= max_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _reset_sequences(dst: Connection, tables: Sequence[Table]) -> None:
    """Point each id sequence past the copied ids: the next insert must not collide."""
    for table in tables:
        for column in _serial_columns(table):
            sequence = dst.scalar(select(func.pg_get_serial_sequence(table.name, column.name)))
            if sequence is None:
                continue
            dst.execute(
                text(
                    f"SELECT setval(:sequence, coalesce(max({column.name}), 1), "
                    f"max({column.name}) IS NOT NULL) FROM {table.name}"
                ),
                {"sequence": sequence},
            )


def _serial_columns(table: Table) -> list[Column[Any]]:
    return [
        c
        for c in table.primary_key.columns
        if isinstance(c.type, Integer) and c.autoincrement in (True, "auto")
    ]


def _compare(
    dst: Connection, tables: Sequence[Table], copied: Sequence[TableCopy], say: Progress
) -> list[str]:
    """Each table read back from the target, against what was read from the source."""
    problems: list[str] = []
    for table, source in zip(tables, copied, strict=True):
        say(f"checking {table.name}")
        hasher = _Hasher()
        rows = dst.execution_options(yield_per=COPY_BATCH_ROWS).execute(
            _ordered(table, "postgresql")
        )
        for row in rows:
            hasher.add(row)
        if hasher.rows != source.rows:
            problems.append(f"{table.name}: {source.rows} rows read, {hasher.rows} in the target")
        elif hasher.hexdigest() != source.sha256:
            problems.append(
                f"{table.name}: rows differ (sha256 {source.sha256} read, "
                f"{hasher.hexdigest()} in the target)"
            )
    return problems


def _check_reports(dst: Connection, say: Progress) -> tuple[int, int, list[str]]:
    """Each copied report against its own `report_sha256`: (checked, pruned, problems)."""
    say("checking every report against its report_sha256")
    checked = pruned = 0
    problems: list[str] = []
    rows = dst.execution_options(yield_per=100).execute(
        select(SESSIONS.c.session_id, SESSIONS.c.report, SESSIONS.c.report_sha256)
    )
    for session_id, raw, expected in rows:
        if raw is None:
            pruned += 1
            continue
        checked += 1
        found = hashlib.sha256(raw).hexdigest()
        if found != expected:
            problems.append(
                f"session {session_id!r}: report bytes hash to {found}, expected {expected}"
            )
    return checked, pruned, problems


def _require_empty(engine: Engine) -> None:
    """Refuse a target holding any of our rows, or tables that are not the verifier's."""
    ours = set(Base.metadata.tables)
    with engine.connect() as connection:
        present = inspect(connection).get_table_names()
        foreign = sorted(
            t for t in present if t not in ours and not t.startswith(FOREIGN_TABLE_PREFIXES)
        )
        if foreign:
            raise ConfigError(
                f"--to: {masked(engine)} is not empty: it has tables that are not the "
                f"verifier's ({', '.join(foreign[:5])}); copy into a new, empty database"
            )
        for name in sorted(ours & set(present)):
            rows = connection.scalar(select(func.count()).select_from(Base.metadata.tables[name]))
            if rows:
                raise ConfigError(
                    f"--to: {masked(engine)} is not empty: table {name} has {rows:,} rows; "
                    "copy into a new, empty database"
                )
