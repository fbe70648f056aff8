"""Benchmark: ingesting reports through the store against a raw executemany of the same rows.

The data: 1,000 valid reports of 17 KB (contract v1: 8 claimed changes, a
trajectory of 12 tool calls with their responses, an audit trail of 14 entries
sealed with `audit.seal`), spread over 4 agents, 3 models, 6 repositories and
30 days, parsed beforehand (`parse_report`; parsing is the report benchmark's).
Each timed run ingests a fresh set of 1,000 session ids, so that every call
stores a new session, as the API does when harnesses post.

The subject is `Store.ingest(report)`, one call per report, each its own
transaction(s), on a SQLite file (WAL, on the machine's disk) and on a
PostgreSQL database on the same machine. The raw operation is what the store
must write for the same reports, through the driver alone (sqlite3, psycopg) in
one transaction: an ``executemany`` of the session rows, of their claimed
changes, and of the `session_counts` upserts. Target: 1,000 reports/s or more
on SQLite through the store.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import audit
from tests.benchmarks.timing import Result, Row, measure
from verifier.contract.report import Report, parse_report
from verifier.store import Store, upgrade

REPORTS = 1_000
TARGET_PER_S = 1_000  # on SQLite, through the store
AGENTS = ("repo-fixer", "claude-ish", "gem-coder", "ops-bot")
MODELS = ("gemini-3.5-flash", "gemini-3.5-pro", None)
REPOS = ("calc", "billing", "web", "infra", "docs", "mobile")
DAY0 = datetime(2026, 10, 1, tzinfo=UTC)
POSTGRES_URL = os.environ.get(
    "VERIFIER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def build(session_id: str, rng: random.Random) -> bytes:
    """One valid report of about 17 KB (seeded)."""
    ended = DAY0 + timedelta(days=rng.randrange(30), seconds=rng.randrange(86_400))
    started = ended - timedelta(minutes=rng.randrange(2, 60))
    contents: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": "Fix the failing tests."}]}
    ]
    bodies: list[dict[str, Any]] = [{"kind": "session_start", "ts": _ts(started)}]
    for i in range(1, 13):
        args = {"path": f"src/module_{i % 8}.py"}
        response = {"content": "".join(rng.choice("abcdef \n") for _ in range(400))}
        call = {"id": f"c{i}", "name": "read_file", "args": args}
        contents.append({"role": "model", "parts": [{"function_call": call}]})
        answer = {"id": f"c{i}", "name": "read_file", "response": response}
        contents.append({"role": "user", "parts": [{"function_response": answer}]})
        bodies.append(
            {
                "kind": "tool_call",
                "ts": _ts(started + timedelta(seconds=i)),
                "call_id": f"c{i}",
                "tool": "read_file",
                "args_sha256": audit.jcs_sha256(args),
                "decision": "allow",
                "checkpoint": None,
                "result_sha256": audit.jcs_sha256(response),
                "effects": [],
            }
        )
    contents.append({"role": "model", "parts": [{"text": "Done."}]})
    done = rng.random() < 0.8
    bodies.append({"kind": "session_end", "ts": _ts(ended), "status": "done" if done else "error"})
    entries = audit.seal(session_id, bodies)
    report = {
        "schema_version": "1",
        "session_id": session_id,
        "agent": {
            "name": rng.choice(AGENTS),
            "version": "1.0",
            "model": rng.choice(MODELS),
            "tool_profile": "default",
        },
        "repo": {
            "name": rng.choice(REPOS),
            "base_commit": hashlib.sha1(session_id.encode()).hexdigest(),
            "head_commit": None,
        },
        "started_at": _ts(started),
        "ended_at": _ts(ended),
        "status": "done" if done else "error",
        "changes": [
            {
                "path": f"src/module_{i}.py",
                "action": "modify",
                "sha256_before": hashlib.sha256(f"{session_id}{i}a".encode()).hexdigest(),
                "sha256_after": hashlib.sha256(f"{session_id}{i}b".encode()).hexdigest(),
            }
            for i in range(8)
        ],
        "trajectory": {"format": "gemini-contents", "contents": contents},
        "audit": {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]},
    }
    return json.dumps(report).encode()


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def report_sets(sets: int) -> list[list[Report]]:
    """`sets` lists of REPORTS parsed reports, every session id distinct."""
    rng = random.Random(7)
    return [
        [parse_report(build(f"s-{k}-{i:05d}", rng)) for i in range(REPORTS)] for k in range(sets)
    ]


def rows(
    reports: list[Report],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows `Store.ingest` writes for `reports`: sessions, claimed changes, counts."""
    sessions, changes, counts = [], [], []
    now = datetime.now(UTC)
    for r in reports:
        d = r.doc
        sessions.append(
            (
                d.session_id, d.agent.name, d.agent.version, d.agent.model, d.agent.tool_profile,
                d.repo.name, d.repo.base_commit, d.repo.head_commit, d.status, r.status, r.done,
                d.started_at, d.ended_at, r.raw, r.sha256, now, "pending",
            )
        )  # fmt: skip
        changes += [
            (d.session_id, n, c.path, c.action, c.sha256_before, c.sha256_after)
            for n, c in enumerate(d.changes)
        ]
        day = d.ended_at.astimezone(UTC).date()
        keys = {"all": "", "agent": d.agent.name, "model": d.agent.model or "", "repo": d.repo.name}
        counts += [(day, dim, key, r.done, "pending", 1) for dim, key in keys.items()]
    return sessions, changes, counts


SESSION_COLUMNS = (
    "session_id, agent_name, agent_version, agent_model, tool_profile, repo_name, base_commit, "
    "head_commit, raw_status, status, done, started_at, ended_at, report, report_sha256, "
    "ingested_at, delivery_status"
)
CHANGE_COLUMNS = "session_id, ordinal, path, action, sha256_before, sha256_after"
COUNT_UPSERT = (
    "INSERT INTO session_counts (day, dimension, key, done, delivery_status, "
    "sessions) VALUES ({p}) ON CONFLICT (day, dimension, key, done, "
    "delivery_status) DO UPDATE SET sessions = session_counts.sessions + excluded.sessions"
)


def batches(reports: list[Report], each: bool) -> list[list[Report]]:
    """One transaction's reports at a time: each alone, or all of them together."""
    return [[report] for report in reports] if each else [reports]


def raw_sqlite(path: Path, *, each: bool = False) -> Callable[[list[Report]], None]:
    """The rows written with sqlite3 alone, with the store's pragmas: in one transaction,
    or with `each` one transaction per report (a commit, so an fsync, per report)."""
    import sqlite3

    from verifier.store.engine import SQLITE_PRAGMAS

    connection = sqlite3.connect(path, isolation_level=None)
    for pragma in SQLITE_PRAGMAS:
        connection.execute(f"PRAGMA {pragma}")

    def to_sqlite(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
        return value

    def write_all(reports: list[Report]) -> None:
        sessions, changes, counts = rows(reports)
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany(
            f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({', '.join('?' * 17)})",
            [tuple(to_sqlite(v) for v in row) for row in sessions],
        )
        connection.executemany(
            f"INSERT INTO claimed_changes ({CHANGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", changes
        )
        connection.executemany(
            COUNT_UPSERT.format(p="?, ?, ?, ?, ?, ?"),
            [(d.isoformat(), *rest) for d, *rest in counts],
        )
        connection.execute("COMMIT")

    def write(reports: list[Report]) -> None:
        for batch in batches(reports, each):
            write_all(batch)

    return write


def raw_postgres(
    url: str, stack: ExitStack, *, each: bool = False
) -> Callable[[list[Report]], None]:
    """The rows written with psycopg alone: in one transaction, or with `each` one
    transaction per report."""
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    connection = psycopg.connect(
        host=parsed.host, port=parsed.port, user=parsed.username, dbname=parsed.database
    )
    stack.callback(connection.close)

    def write(reports: list[Report]) -> None:
        for batch in batches(reports, each):
            write_all(batch)

    def write_all(reports: list[Report]) -> None:
        sessions, changes, counts = rows(reports)
        with connection.transaction(), connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({', '.join(['%s'] * 17)})",
                sessions,
            )
            cursor.executemany(
                f"INSERT INTO claimed_changes ({CHANGE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
                changes,
            )
            cursor.executemany(COUNT_UPSERT.format(p=", ".join(["%s"] * 6)), counts)

    return write


def each_set(
    targets: dict[str, Callable[[list[Report]], None]], sets: list[list[Report]]
) -> dict[str, Callable[[], None]]:
    """For `measure`: each call of a target writes the next set, so every run is new."""
    iterators: dict[str, Iterator[list[Report]]] = {name: iter(sets) for name in targets}
    return {
        name: (lambda w=write, it=iterators[name]: w(next(it))) for name, write in targets.items()
    }


def through_store(store: Store) -> Callable[[list[Report]], None]:
    def write(reports: list[Report]) -> None:
        for report in reports:
            _, created = store.ingest(report)
            assert created

    return write


def _postgres_databases(stack: ExitStack, n: int) -> list[str] | None:
    from sqlalchemy.exc import OperationalError

    from tests.support.pg import postgres_database

    urls: list[str] = []
    try:
        for _ in range(n):
            url = stack.enter_context(postgres_database(POSTGRES_URL))
            upgrade(url)
            urls.append(url)
    except OperationalError:
        return None
    return urls


def run(tmp: Path, repeat: int) -> Result:
    sets = report_sets(repeat + 1)  # the warm-up ingests one set too
    sizes = [len(r.raw) for s in sets for r in s]
    targets: dict[str, Callable[[list[Report]], None]] = {}
    with ExitStack() as stack:
        store = stack.enter_context(Store.open(f"sqlite:///{tmp / 'store.sqlite3'}"))
        targets["sqlite store"] = through_store(store)
        raw_path = tmp / "raw.sqlite3"
        Store.open(f"sqlite:///{raw_path}").close()  # the same schema, migrated
        targets["sqlite raw"] = raw_sqlite(raw_path)
        postgres = _postgres_databases(stack, 2)
        if postgres is not None:
            targets["postgres store"] = through_store(stack.enter_context(Store.open(postgres[0])))
            targets["postgres raw"] = raw_postgres(postgres[1], stack)

        t = measure(each_set(targets, sets), repeat)

    rows_out = [
        Row(
            "ingest",
            f"Store.ingest x {REPORTS:,}, SQLite ({REPORTS / t['sqlite store']:,.0f}/s)",
            t["sqlite store"],
            "executemany of the same rows, one transaction",
            t["sqlite raw"],
            f">= {TARGET_PER_S:,}/s",
            REPORTS / TARGET_PER_S,
        )
    ]
    if "postgres store" in t:
        rows_out.append(
            Row(
                "ingest",
                f"Store.ingest x {REPORTS:,}, PostgreSQL ({REPORTS / t['postgres store']:,.0f}/s)",
                t["postgres store"],
                "executemany of the same rows, one transaction",
                t["postgres raw"],
            )
        )
    facts = {
        "reports": f"{REPORTS:,} per timed run, {sum(sizes) / len(sizes) / 1000:.1f} KB each on "
        "average, 8 claimed changes each; a fresh set of session ids per run",
        "rates": ", ".join(f"{name} {REPORTS / s:,.0f}/s" for name, s in t.items()),
    }
    if "postgres store" not in t:
        facts["postgresql"] = f"not measured: no server at {POSTGRES_URL}"
    return Result(rows_out, facts)
