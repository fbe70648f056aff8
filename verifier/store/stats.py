"""Counting sessions: the `session_counts` the store keeps, and the `Stats` read from them.

Each session counts once in each of four dimensions (all, its agent, its model,
its repository) under the UTC day it ended, its done flag and its current
verdict. `Store.ingest` adds it as pending and `Store.record_run` moves it when
its verdict changes, with the `count_upsert` statement on the `count_rows` of
the session, in the transaction that changes it. `stats` then reads those
counts, or the sessions themselves for filters the counts cannot answer.

The sessions counted ended in a span, from a moment (included) to a moment
(excluded), either open; `bounds` reads one as people type it in `from` and `to`.

`failure_reasons` counts sessions by the check and finding code of their shown
run's findings, with `has_finding` as the one condition a list filtered on a
row uses, so that the row's count and the list's length are the same query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, select
from sqlalchemy.orm import Session

from verifier.errors import BadRequest
from verifier.moments import parse_end, parse_moment
from verifier.store.models import FindingModel, SessionCountModel, SessionModel
from verifier.store.rows import GROUP_BY, Counts, FailureReason, Group, Stats

# How the counts are read: the store's own transaction (`Store.transaction`).
Transaction = Callable[[], AbstractContextManager[Session]]

# The key of a `session_counts` row; `sessions` is its one value.
COUNT_KEY = ("day", "dimension", "key", "done", "delivery_status")


def dialect_insert(dialect: str, table: Any) -> Any:
    """An INSERT into `table` in `dialect`'s own form, for its ON CONFLICT clauses. Each
    dialect's module is imported when asked for: a SQLite store never loads PostgreSQL's
    (about a tenth of a second of every store command's start-up)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)


def count_upsert(dialect: str) -> Any:
    """`session_counts` += `sessions` for one key, as one statement with bound values."""
    table = SessionModel.metadata.tables["session_counts"]
    statement = dialect_insert(dialect, table)
    return statement.on_conflict_do_update(
        index_elements=list(COUNT_KEY),
        set_={"sessions": table.c.sessions + statement.excluded.sessions},
    )


def count_rows(
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


def bounds(first: str | None, last: str | None) -> tuple[datetime | None, datetime | None]:
    """The span a `from` and a `to` name, as every face types a moment
    (`verifier.moments.parse_moment`: a date, or a date and time with its offset): from
    `first` (included) to `last` (excluded). A `to` that is a date names its whole day
    (`verifier.moments.parse_end`); one with a time is the moment the sessions ended
    before. Empty is open. `BadRequest` naming the field at fault."""
    start = parse_moment(first, "from") if first else None
    end = parse_end(last, "to") if last else None
    if start is not None and end is not None and start >= end:
        raise BadRequest("from", f"got {first!r}, expected a moment before to={last!r}")
    return start, end


def stats(
    transaction: Transaction,
    *,
    ended_from: datetime | None = None,
    ended_to: datetime | None = None,
    group_by: str | None = None,
    agent: str | None = None,
    model: str | None = None,
    repo: str | None = None,
) -> Stats:
    """Counts of the sessions that ended from `ended_from` (included) to `ended_to`
    (excluded), in all and by `group_by` (day, week, agent, model, repo: days are UTC
    days, so a span that starts or ends within one counts that day's sessions of the
    span only), of one agent, model ('' for none) or repository when given, read in
    `transaction`.

    Read from `session_counts`, never from the sessions, when the span's bounds are
    midnights (UTC), at most one of agent, model and repo is given and the grouping is
    by time or by that same dimension: the cost is the number of days times the values
    of one dimension, whatever the number of sessions. Other combinations count the
    matching sessions themselves.
    """
    if group_by is not None and group_by not in GROUP_BY:
        raise BadRequest("group_by", f"must be one of {', '.join(GROUP_BY)}, got {group_by!r}")
    if ended_from is not None and ended_to is not None and ended_from >= ended_to:
        raise BadRequest("from", f"{utc(ended_from)} is not before to={utc(ended_to)}")
    wanted = {
        d: k for d, k in (("agent", agent), ("model", model), ("repo", repo)) if k is not None
    }
    whole_days = all(m is None or _midnight(m) for m in (ended_from, ended_to))
    if (
        not whole_days
        or len(wanted) > 1
        or (wanted and group_by not in (None, "day", "week", *wanted))
    ):
        return _stats_from_sessions(transaction, ended_from, ended_to, group_by, wanted)
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
    if ended_from is not None:
        query = query.where(SessionCountModel.day >= utc(ended_from).date())
    if ended_to is not None:
        query = query.where(SessionCountModel.day < utc(ended_to).date())
    with transaction() as session:
        rows = session.execute(query).all()
    return _stats(group_by, ((*key, done, status, n) for *key, done, status, n in rows))


def _stats_from_sessions(
    transaction: Transaction,
    ended_from: datetime | None,
    ended_to: datetime | None,
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
    if ended_from is not None:
        conditions.append(SessionModel.ended_at >= ended_from)
    if ended_to is not None:
        conditions.append(SessionModel.ended_at < ended_to)
    keys = (
        []
        if group_by is None
        else [SessionModel.ended_at if group_by in ("day", "week") else columns[group_by]]
    )
    query = select(*keys, SessionModel.done, SessionModel.delivery_status).where(*conditions)
    with transaction() as session:
        rows = session.execute(query).all()

    def key_of(value: Any) -> Any:
        if group_by in ("day", "week"):
            return value.astimezone(UTC).date()
        return "" if value is None else value

    return _stats(group_by, ((*(key_of(k) for k in key), d, s, 1) for *key, d, s in rows))


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


def utc(moment: datetime) -> datetime:
    """An aware moment in UTC."""
    return moment.astimezone(UTC)


def _midnight(moment: datetime) -> bool:
    return utc(moment).time() == time(0)


def _group_key(group_by: str | None, value: Any) -> str:
    if group_by in ("day", "week"):
        day = value if isinstance(value, date) else date.fromisoformat(str(value))
        if group_by == "week":
            day -= timedelta(days=day.weekday())
        return day.isoformat()
    return str(value)


def _shown_run() -> ColumnElement[Any]:
    """The run a session's verdict shows: the verdict run, else the latest run."""
    return func.coalesce(SessionModel.verdict_run_id, SessionModel.latest_run_id)


def has_finding(check: str, code: str | None = None) -> ColumnElement[bool]:
    """Sessions whose shown run has a finding of `check` (and of `code` when given)."""
    match = [FindingModel.run_id == _shown_run(), FindingModel.check_name == check]
    if code is not None:
        match.append(FindingModel.code == code)
    return exists().where(and_(*match))


def failure_reasons(
    transaction: Transaction, conditions: Iterable[ColumnElement[bool]]
) -> list[FailureReason]:
    """Sessions that pass `conditions`, counted by each (check, code) their shown run
    has a finding of, and by each check (`code` None): a session counts once in every
    row it has a finding of. Most sessions first, then by check and code."""
    sessions = select(SessionModel.session_id, _shown_run().label("run_id")).where(*conditions)
    shown = sessions.subquery()
    pairs = (
        select(FindingModel.check_name, FindingModel.code, shown.c.session_id)
        .join(shown, FindingModel.run_id == shown.c.run_id)
        .distinct()
        .subquery()
    )
    by_code = select(pairs.c.check_name, pairs.c.code, func.count()).group_by(
        pairs.c.check_name, pairs.c.code
    )
    by_check = select(pairs.c.check_name, func.count(func.distinct(pairs.c.session_id))).group_by(
        pairs.c.check_name
    )
    with transaction() as session:
        codes = session.execute(by_code).all()
        checks: dict[str, int] = {c: int(n) for c, n in session.execute(by_check).all()}
    rows = [FailureReason(check, None, int(n)) for check, n in checks.items()]
    rows += [FailureReason(check, code, int(n)) for check, code, n in codes]
    rows.sort(
        key=lambda r: (-checks[r.check], r.check, r.code is not None, -r.sessions, r.code or "")
    )
    return rows
