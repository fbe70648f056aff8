"""Benchmark: `Store.stats()` over 1,000,000 sessions on PostgreSQL, against the raw GROUP BY.

The data: 1,000,000 sessions generated in the database (``generate_series``,
``setseed`` so every run loads the same rows) over the 365 days before
2026-12-01, 3 agents with 3 models (one of them none), 12 repositories, 80 %
done, verdicts 60 % delivered, 22 % not delivered, 10 % inconclusive, 8 %
pending. `session_counts` is then filled the way migration 0004 fills it (one
GROUP BY over the sessions), and both tables are vacuumed and analysed. Report
bytes are two bytes each: real reports are stored out of line (TOAST), so the
sessions heap the raw query scans is about this size either way.

The subject is `Store.stats(...)` (what ``GET /v1/stats`` returns), which reads
the `session_counts` aggregate; the raw operation is the same counts computed
from the sessions table with one GROUP BY (counts with FILTER), through the
same engine. Three queries: all time, the last 30 days by day, all time by
repository. Target: 50 ms or less for each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from tests.benchmarks.timing import Result, Row, measure
from verifier.store import Store, upgrade

SESSIONS = 1_000_000
TARGET_S = 0.050
LAST_DAY = date(2026, 11, 30)
POSTGRES_URL = os.environ.get(
    "VERIFIER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)

LOAD = f"""
INSERT INTO sessions (session_id, agent_name, agent_version, agent_model, tool_profile,
    repo_name, base_commit, head_commit, branch, raw_status, status, done, started_at, ended_at,
    report, report_sha256, ingested_at, delivery_status)
SELECT 's-' || lpad(g::text, 7, '0'),
    (ARRAY['repo-fixer', 'gem-coder', 'ops-bot'])[1 + (a * 3)::int % 3],
    '1.0',
    (ARRAY['gemini-3.5-flash', 'gemini-3.5-pro', NULL])[1 + (m * 3)::int % 3],
    'default',
    'repo-' || (1 + (r * 12)::int % 12),
    md5(g::text) || substr(md5(g::text), 1, 8), NULL, 'main',
    CASE WHEN d < 0.8 THEN 'done' ELSE 'error' END,
    CASE WHEN d < 0.8 THEN 'done' ELSE 'error' END,
    d < 0.8,
    ended - interval '20 minutes', ended,
    '\\x7b7d'::bytea, md5(g::text) || md5(g::text), ended,
    CASE WHEN v < 0.60 THEN 'delivered' WHEN v < 0.82 THEN 'not_delivered'
         WHEN v < 0.92 THEN 'inconclusive' ELSE 'pending' END
FROM (
    SELECT g, random() AS a, random() AS m, random() AS r, random() AS d, random() AS v,
        timestamptz '{LAST_DAY + timedelta(days=1)} 00:00:00+00'
            - (random() * interval '365 days') AS ended
    FROM generate_series(1, {SESSIONS}) AS g
) AS drawn
"""
# Exactly what migration 0004 runs on PostgreSQL to fill the aggregate.
DAY = "CAST(ended_at AT TIME ZONE 'UTC' AS date)"
BACKFILL = ";\n".join(
    "INSERT INTO session_counts (day, dimension, key, done, delivery_status, sessions) "
    f"SELECT {DAY}, '{dimension}', {key}, done, delivery_status, count(*) FROM sessions "
    "GROUP BY 1, 3, 4, 5"
    for dimension, key in {
        "all": "''",
        "agent": "agent_name",
        "model": "coalesce(agent_model, '')",
        "repo": "repo_name",
    }.items()
)
COUNTS = (
    "count(*), count(*) FILTER (WHERE done), "
    "count(*) FILTER (WHERE delivery_status = 'delivered'), "
    "count(*) FILTER (WHERE delivery_status = 'not_delivered'), "
    "count(*) FILTER (WHERE delivery_status = 'inconclusive'), "
    "count(*) FILTER (WHERE delivery_status = 'pending'), "
    "count(*) FILTER (WHERE done AND delivery_status = 'not_delivered'), "
    "count(*) FILTER (WHERE done AND delivery_status IN ('delivered', 'not_delivered'))"
)


def load(url: str) -> dict[str, str]:
    """Fill the database at `url`; facts about what was loaded."""
    from sqlalchemy import NullPool, create_engine

    engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT setseed(0.42)"))
            connection.execute(text(LOAD))
            connection.execute(text(BACKFILL))
            connection.execute(text("VACUUM ANALYZE sessions"))
            connection.execute(text("VACUUM ANALYZE session_counts"))
            aggregate = connection.scalar(text("SELECT count(*) FROM session_counts"))
            size = connection.scalar(text("SELECT pg_size_pretty(pg_table_size('sessions'))"))
    finally:
        engine.dispose()
    return {"session_counts rows": f"{aggregate:,}", "sessions table": f"{size} (heap)"}


def raw(engine: Engine, *, day_from: date | None, group: str | None) -> list[Any]:
    where = ""
    params: dict[str, Any] = {}
    if day_from is not None:
        where = f"WHERE {DAY} >= :day_from"
        params["day_from"] = day_from
    key = {"day": DAY, "repo": "repo_name", None: None}[group]
    select = f"SELECT {key + ', ' if key else ''}{COUNTS} FROM sessions {where}"
    query = select + (f" GROUP BY {key} ORDER BY {key}" if key else "")
    with engine.connect() as connection:
        return list(connection.execute(text(query), params).all())


def run(_tmp: Path, repeat: int) -> Result:
    from sqlalchemy.exc import OperationalError

    from tests.support.pg import postgres_database

    with ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_database(POSTGRES_URL))
        except OperationalError:
            return Result([], {"postgresql": f"not measured: no server at {POSTGRES_URL}"})
        upgrade(url)
        facts = load(url)
        store = stack.enter_context(Store.open(url))
        engine = store._engine
        _same_totals(store, engine)
        month = LAST_DAY - timedelta(days=29)
        queries: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
            "all time": (
                lambda: store.stats(),
                lambda: raw(engine, day_from=None, group=None),
            ),
            "last 30 days by day": (
                lambda: store.stats(
                    ended_from=datetime.combine(month, time(), tzinfo=UTC),
                    ended_to=datetime.combine(LAST_DAY + timedelta(days=1), time(), tzinfo=UTC),
                    group_by="day",
                ),
                lambda: raw(engine, day_from=month, group="day"),
            ),
            "all time by repository": (
                lambda: store.stats(group_by="repo"),
                lambda: raw(engine, day_from=None, group="repo"),
            ),
        }
        runs: dict[str, Callable[[], object]] = {}
        for name, (subject, baseline) in queries.items():
            runs[f"stats {name}"] = subject
            runs[f"raw {name}"] = baseline
        t = measure(runs, repeat)
    rows = [
        Row(
            "stats",
            f"Store.stats, {name}, {SESSIONS:,} sessions (PostgreSQL)",
            t[f"stats {name}"],
            "GROUP BY on the sessions table",
            t[f"raw {name}"],
            f"<= {TARGET_S * 1000:g} ms",
            TARGET_S,
        )
        for name in queries
    ]
    return Result(rows, facts)


def _same_totals(store: Store, engine: Engine) -> None:
    """The aggregate must say what the sessions say, or the comparison means nothing."""
    totals = store.stats().totals
    (row,) = raw(engine, day_from=None, group=None)
    found = (
        totals.total,
        totals.done,
        totals.delivered,
        totals.not_delivered,
        totals.inconclusive,
        totals.pending,
        totals.silent_failures,
        totals.done_conclusive,
    )
    assert found == tuple(row), (found, tuple(row))
