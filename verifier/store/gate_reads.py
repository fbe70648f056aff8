"""The merge gate's reads of a store: text SQL through the driver's own cursor.

`verifier gate` reads many sessions once per process, and every statement of
SQLAlchemy's Core is compiled the first time an engine runs it, its result rows
built and their types processed: for the gate's thousand sessions that was most
of its time. `GateReads` opens the store as `Store.open` does (the same engine,
URL checks, read-only connection and errors), checks its revision with one
SELECT, and reads with the statements below, one per dialect, on one connection
of the engine's pool, handing out plain tuples. The values are those the `Store`
loads (a session's columns as `SessionRow` has them, a run's findings in
`findings.deciding_order`, the JSON values at a path of a run's result document),
on SQLite and PostgreSQL alike: `tests/store/test_gate_reads.py` holds them to
`Store.listed`, `Store.runs` and `overrides.overrides`.

A failure of the driver is the `Store`'s: an `InfrastructureError` naming the
database (`engine.reachable`'s message); a store behind this verifier is the
`ConfigError` of `engine.at_head`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine import URL

from verifier.errors import InfrastructureError
from verifier.findings import DECIDING_RANK, OTHER_RANK, Finding
from verifier.store.engine import (
    HEAD_REVISION,
    at_head,
    connect_read_only_sqlite,
    make_engine,
    masked,
    parse_url,
    reachable,
    read_only_sqlite_file,
)

# Values per IN list (SQLite allows 32,766 bound values, PostgreSQL 65,535).
PER_QUERY = 1000

# A session as the gate reads it, in this order: ``status`` is the agent's, ``run_id``
# the run the verdict shows (the verdict run, else the latest), ``findings`` that run's,
# as `Store.findings_of` gives them (the deciding one first), ``audit`` the audit check's
# result in that run when it says ``trail = "none"``, else None (what
# `findings.trail_note` reads). The first eleven are `verifier.app.gate.GateSession`'s
# fields, in its order (the override's status where it holds the override).
GATE_LINE = (
    "session_id",
    "delivery_status",
    "override_status",
    "repo_name",
    "head_commit",
    "branch",
    "status",
    "done",
    "ended_at",
    "run_id",
    "findings",
    "audit",
)

# A finding whose check has no result row: ranked as SQL's CASE ranks a NULL status.
_UNRANKED = (OTHER_RANK, 0)


class _Dialect:
    """The statements of one dialect: its placeholder, and a JSON value at a path of a
    run's ``result`` as JSON text (SQL NULL where there is none)."""

    def __init__(self, mark: str, json_at: str, text_at: str) -> None:
        self.mark = mark
        self._json_at = json_at
        self._text_at = text_at

    def json_at(self, column: str, *path: str) -> str:
        return self._json_at.format(column=column, path=self._path(path))

    def text_at(self, column: str, *path: str) -> str:
        return self._text_at.format(column=column, path=self._path(path))

    def holds(self, column: str, text: str) -> str:
        """Whether the JSON text of `column` holds `text` (SQL: a literal, no quote in it)."""
        if self.mark == "?":
            return f"instr({column}, '{text}') > 0"
        return f"strpos(CAST({column} AS TEXT), '{text}') > 0"

    def marks(self, n: int) -> str:
        return ", ".join([self.mark] * n)

    def _path(self, path: Sequence[str]) -> str:
        if self.mark == "?":
            return "$." + ".".join(f'"{p}"' for p in path)
        return "{" + ",".join(path) + "}"


# As SQLAlchemy's JSON type writes a path on each: SQLite's JSON_QUOTE(JSON_EXTRACT()) is
# the value's JSON text (a string quoted), PostgreSQL's ``#>`` the value as json.
_DIALECTS = {
    "sqlite": _Dialect(
        "?",
        "JSON_QUOTE(JSON_EXTRACT({column}, '{path}'))",
        "CAST(JSON_EXTRACT({column}, '{path}') AS VARCHAR)",
    ),
    "postgresql": _Dialect("%s", "CAST(({column} #> '{path}') AS TEXT)", "({column} #>> '{path}')"),
}


class GateReads:
    """What the gate reads of the store at `url`, opened read-only; `close` when done.

    A SQLite file is read on a connection of its own, made as a read-only store's engine
    makes them (`engine.connect_read_only_sqlite`): no engine, no pool (their making and
    disposal cost more than the connection). Any other database through its engine's
    pool, with the engine's connect arguments (PostgreSQL's read-only sessions).
    """

    def __init__(self, url: str, engine: Engine | None = None) -> None:
        self._url = url
        self._engine = engine
        if engine is None:
            path = read_only_sqlite_file(parse_url(url))
            # Named as the read-only engine names it, so that messages are the `Store`'s.
            self._where = URL.create("sqlite", database=str(path)).render_as_string()
            self._dialect = _DIALECTS["sqlite"]
            self._dbapi: Any = sqlite3
            with self._driver_errors():
                self._connection: Any = connect_read_only_sqlite(path)
        else:
            if engine.dialect.name not in _DIALECTS:
                raise InfrastructureError(
                    f"database {masked(engine)}: the gate reads SQLite or PostgreSQL only"
                )
            self._where = masked(engine)
            self._dialect = _DIALECTS[engine.dialect.name]
            self._dbapi = engine.dialect.loaded_dbapi
            # The pool hands over the driver's own errors: said as the `Store` says them.
            with reachable(engine), self._driver_errors():
                self._connection = engine.raw_connection()
        self._sessions = self._sessions_query()

    @classmethod
    def open(cls, url: str) -> GateReads:
        """Open the store as ``Store.open(url, read_only=True)`` does, with its errors; its
        revision is read with one SELECT (`engine.at_head` only when that is not the head,
        to say why)."""
        if parse_url(url).get_backend_name() == "sqlite":
            reads = cls(url)
        else:
            engine = make_engine(url, read_only=True)
            try:
                reads = cls(url, engine)
            except BaseException:
                engine.dispose()
                raise
        try:
            if not reads._at_head():
                reads._why_not_at_head()
        except BaseException:
            reads.close()
            raise
        return reads

    def close(self) -> None:
        """Close the connection (give it back to the engine's pool, and close those)."""
        try:
            self._connection.close()
        finally:
            if self._engine is not None:
                self._engine.dispose()

    def __enter__(self) -> GateReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dialect(self) -> str:
        return "sqlite" if self._engine is None else self._engine.dialect.name

    def gate_lines(
        self,
        *,
        session_ids: Sequence[str] = (),
        head_commits: Sequence[str] = (),
        branches: Sequence[str] = (),
        per_query: int = PER_QUERY,
    ) -> dict[str, tuple[Any, ...]]:
        """Every session with one of `session_ids`, one of `head_commits` as its head, or on
        one of `branches`, once each, by id: tuples of `GATE_LINE`, ``ended_at`` aware and
        in UTC, ``done`` a bool, ``findings`` a tuple; ids and commits `per_query` to a
        query."""
        found: dict[str, tuple[Any, ...]] = {}
        for column, values in (("session_id", session_ids), ("head_commit", head_commits)):
            for chunk in _chunks(values, per_query):
                where = f"s.{column} IN ({self._dialect.marks(len(chunk))})"
                self._lines(found, where, chunk)
        for branch in branches:
            self._lines(found, f"s.branch = {self._dialect.mark}", [branch])
        return found

    def result_values(self, run_ids: Collection[int], path: tuple[str, ...]) -> dict[int, Any]:
        """The value at `path` in each run's result document, picked out in SQL (no
        document is read whole) as SQLAlchemy's JSON type reads it; a run without one
        (or with JSON null there) is left out."""
        found: dict[int, Any] = {}
        value = self._dialect.json_at("result", *path)
        for chunk in _chunks(sorted(set(run_ids))):
            statement = (
                f"SELECT id, {value} FROM verification_runs "
                f"WHERE id IN ({self._dialect.marks(len(chunk))})"
            )
            for run_id, text in self._rows(statement, chunk):
                loaded = None if text is None else json.loads(text)
                if loaded is not None:
                    found[run_id] = loaded
        return found

    def last_overrides(self, session_ids: Collection[str]) -> dict[str, tuple[str, str]]:
        """The author and reason of each session's last override (the one that stands, as
        `overrides.overrides` orders them), by session id; a session without one is left
        out."""
        found: dict[str, tuple[str, str]] = {}
        for chunk in _chunks(sorted(set(session_ids))):
            statement = (
                "SELECT session_id, author, reason FROM verdict_overrides "
                f"WHERE session_id IN ({self._dialect.marks(len(chunk))}) ORDER BY id"
            )
            for session_id, author, reason in self._rows(statement, chunk):
                found[session_id] = (author, reason)
        return found

    def holds_any(self, head_commits: Sequence[str], per_query: int = PER_QUERY) -> bool:
        """Whether any stored session has one of `head_commits` as its head."""
        for chunk in _chunks(head_commits, per_query):
            statement = (
                "SELECT 1 FROM sessions "
                f"WHERE head_commit IN ({self._dialect.marks(len(chunk))}) LIMIT 1"
            )
            if self._rows(statement, chunk):
                return True
        return False

    # -- underneath ---------------------------------------------------------------------

    def _sessions_query(self) -> str:
        """A row per session and finding of its shown run (one row with no finding for a
        run without any): one join, where an EXISTS and a query of the findings cost twice
        as much. The findings' checks are read (`_ranks`) only for the runs with more
        than one finding, the ones there is an order to find. The audit result is read
        only from documents that hold ``"trail"``: the audit check is the one writer of
        that key, and a JSON writer spells a key of ASCII letters as it is, so every other
        document is spared the parse of its JSON."""
        shown = "coalesce(s.verdict_run_id, s.latest_run_id)"
        trail = self._dialect.text_at("r.result", "checks", "audit", "details", "trail")
        audit = self._dialect.json_at("r.result", "checks", "audit")
        holds = self._dialect.holds("r.result", '"trail"')
        return (
            "SELECT s.session_id, s.delivery_status, s.override_status, s.repo_name, "
            f"s.head_commit, s.branch, s.status, s.done, s.ended_at, {shown}, "
            f"CASE WHEN {holds} AND {trail} = 'none' THEN {audit} END, "
            "f.code, f.message, f.path, f.expected, f.found, f.check_name, f.ordinal "
            f"FROM sessions s LEFT OUTER JOIN verification_runs r ON r.id = {shown} "
            "LEFT OUTER JOIN findings f ON f.run_id = r.id WHERE "
        )

    def _lines(self, found: dict[str, tuple[Any, ...]], where: str, params: list[Any]) -> None:
        """The sessions `where` keeps that `found` does not hold yet, added to it."""
        lines: dict[str, tuple[Any, ...]] = {}
        ranked: dict[str, list[tuple[Any, ...]]] = {}
        for row in self._rows(self._sessions + where, params):
            sid = row[0]
            if sid in found:
                continue
            if row[11] is not None:  # a finding: its check, its position, what it says
                ranked.setdefault(sid, []).append(row[16:18] + row[11:16])
            if sid not in lines:
                done, ended, audit = row[7], row[8], row[10]
                if ended is not None:
                    ended = _moment(ended)
                lines[sid] = (
                    sid,
                    row[1],
                    row[2],
                    row[3],
                    row[4],
                    row[5],
                    row[6],
                    None if done is None else bool(done),
                    ended,
                    row[9],
                    (),
                    None if audit is None else json.loads(audit),
                )
        several = [lines[sid][9] for sid, items in ranked.items() if len(items) > 1]
        ranks = self._ranks(several) if several else {}
        for sid, items in ranked.items():
            line = lines[sid]
            if len(items) > 1:  # ranked as `findings.deciding_order` ranks, as SQL did
                run = line[9]
                items.sort(key=lambda item: (*ranks.get((run, item[0]), _UNRANKED), item[1]))
            lines[sid] = (*line[:10], tuple(Finding(*item[2:]) for item in items), line[11])
        found.update(lines)

    def _ranks(self, run_ids: Sequence[int]) -> dict[tuple[int, str], tuple[int, int]]:
        """The rank of each check of `run_ids` (`findings.DECIDING_RANK`, as its status
        says) and its position, by run and check name."""
        found: dict[tuple[int, str], tuple[int, int]] = {}
        for chunk in _chunks(run_ids):
            statement = (
                "SELECT run_id, check_name, status, ordinal FROM check_results "
                f"WHERE run_id IN ({self._dialect.marks(len(chunk))})"
            )
            for run_id, check, status, ordinal in self._rows(statement, chunk):
                found[(run_id, check)] = (DECIDING_RANK.get(status, OTHER_RANK), ordinal or 0)
        return found

    def _rows(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._driver_errors():
            cursor = self._connection.cursor()
            try:
                cursor.execute(statement, params)
                return list(cursor.fetchall())
            finally:
                cursor.close()

    def _at_head(self) -> bool:
        """Whether the store's revision is `HEAD_REVISION`, read in one SELECT; False when
        it cannot be read (no version table, not a database: `at_head` says which)."""
        try:
            rows = self._rows("SELECT version_num FROM alembic_version", ())
        except (InfrastructureError, self._dbapi.Error):
            self._connection.rollback()
            return False
        return sorted(row[0] for row in rows) == [HEAD_REVISION]

    def _why_not_at_head(self) -> None:
        """`engine.at_head`'s error for this store (behind this verifier, never migrated,
        not a database); nothing when it is at the head after all."""
        engine = self._engine or make_engine(self._url, read_only=True)
        try:
            at_head(engine, read_only=True)
        finally:
            if engine is not self._engine:
                engine.dispose()

    @contextmanager
    def _driver_errors(self) -> Iterator[None]:
        """The driver's failure to talk to the database as `engine.reachable` says it;
        anything else (a bad statement, a constraint) as it came."""
        dbapi = self._dbapi
        try:
            yield
        except (dbapi.OperationalError, dbapi.InterfaceError, dbapi.DatabaseError) as exc:
            if type(exc) is not dbapi.DatabaseError and not isinstance(
                exc, (dbapi.OperationalError, dbapi.InterfaceError)
            ):
                raise
            reason = str(exc).strip() or type(exc).__name__
            raise InfrastructureError(f"database {self._where} cannot be used: {reason}") from exc


def _chunks(values: Sequence[Any], size: int = PER_QUERY) -> Iterator[list[Any]]:
    """`values` in lists of `size` or fewer, in order: one IN list a query."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def _moment(value: str | datetime) -> datetime:
    """A stored time, aware and in UTC (as `UTCDateTime` reads it): SQLite keeps the UTC
    time as text without an offset, which is parsed with it (a fifth of the CPU of
    `datetime.replace`)."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value + "+00:00")
        except ValueError:  # it had an offset, or is no time: as `UTCDateTime` would
            value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
