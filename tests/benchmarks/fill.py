"""Many stored sessions, cheaply: rows written straight into a migrated SQLite store.

For the consumer benchmarks (export, gate, dashboard), which read a store and do
not care how the rows got there. Each session row is what `Store.ingest` writes
(the report itself is two bytes, as in store_stats.py: the readers timed here
never read it); each verified session has one run as `Store.record_run` writes
it: the run row with its result JSON (`Verification.to_dict()` of a real
`Verification`), three check results, a finding for a run not delivered, and the
session's `verdict_run_id`, `latest_run_id`, `verified_at`. `session_counts` is
then filled the way migration 0004 fills it on SQLite. Seeded: the same rows
every time.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.support.api import verification
from verifier.store import upgrade

AGENTS = ("repo-fixer", "gem-coder", "ops-bot")
MODELS = ("gemini-3.5-flash", "gemini-3.5-pro", None)
REPOS = tuple(f"repo-{i}" for i in range(1, 13))
LAST = datetime(2026, 12, 1, tzinfo=UTC)
_FORMAT = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy writes a DateTime into SQLite

SESSION_COLUMNS = (
    "session_id, agent_name, agent_version, agent_model, tool_profile, repo_name, base_commit, "
    "head_commit, branch, raw_status, status, done, started_at, ended_at, report, "
    "report_sha256, ingested_at, delivery_status, verdict_run_id, latest_run_id, verified_at"
)
RUN_COLUMNS = (
    "id, session_id, verifier_version, delivery_status, started_at, finished_at, duration_s, "
    "result, reason, job_id, worker"
)
DAY = "date(ended_at)"
BACKFILL = [
    "INSERT INTO session_counts (day, dimension, key, done, delivery_status, sessions) "
    f"SELECT {DAY}, '{dimension}', {key}, done, delivery_status, count(*) FROM sessions "
    "GROUP BY 1, 3, 4, 5"
    for dimension, key in {
        "all": "''",
        "agent": "agent_name",
        "model": "coalesce(agent_model, '')",
        "repo": "repo_name",
    }.items()
]


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(tzinfo=None).strftime(_FORMAT)


def fill_sqlite(
    path: Path,
    sessions: int,
    *,
    days: int = 365,
    head_commits: Sequence[str] = (),
    seed: int = 42,
) -> str:
    """A migrated SQLite store at `path` holding `sessions` sessions; its URL.

    Verdicts: 60 % delivered, 22 % not delivered, 10 % inconclusive, 8 % pending
    (no run); 80 % done; ended over the `days` days before 2026-12-01. With
    `head_commits`, session i has head commit ``head_commits[i % len]``.
    """
    url = f"sqlite:///{path}"
    upgrade(url)
    rng = random.Random(seed)
    templates = {
        status: json.dumps(
            verification(
                "SID", failed=status == "not_delivered", error=status == "inconclusive"
            ).to_dict()
        )
        for status in ("delivered", "not_delivered", "inconclusive")
    }
    session_rows, run_rows, check_rows, finding_rows = [], [], [], []
    run_id = 0
    for i in range(sessions):
        sid = f"s-{i:07d}"
        ended = LAST - timedelta(seconds=rng.randrange(days * 86_400))
        started = ended - timedelta(minutes=20)
        done = rng.random() < 0.8
        v = rng.random()
        status = (
            "delivered"
            if v < 0.60
            else "not_delivered"
            if v < 0.82
            else "inconclusive"
            if v < 0.92
            else "pending"
        )
        head = head_commits[i % len(head_commits)] if head_commits else None
        verdict_id = latest_id = verified = None
        if status != "pending":
            run_id += 1
            finished = ended + timedelta(minutes=3)
            run_rows.append(
                (
                    run_id, sid, "0.1.0", status, _stamp(finished - timedelta(seconds=2)),
                    _stamp(finished), 2.0, templates[status].replace('"SID"', f'"{sid}"'),
                    "ingest", None, "worker-1",
                )
            )  # fmt: skip
            checks = (
                ("changes", "fail" if status == "not_delivered" else "pass"),
                ("tests", "error" if status == "inconclusive" else "pass"),
                ("audit", "pass"),
            )
            for ordinal, (name, check) in enumerate(checks):
                check_rows.append((run_id, name, ordinal, check, 0.02))
            if status == "not_delivered":
                finding_rows.append(
                    (run_id, "changes", 0, "change.missing", "calc.py is not at head", "calc.py")
                )
            elif status == "inconclusive":
                finding_rows.append(
                    (run_id, "tests", 0, "tests.no_command", "no test command configured", None)
                )
            latest_id = run_id
            verdict_id = run_id if status != "inconclusive" else None
            verified = _stamp(finished)
        raw = "done" if done else "error"
        session_rows.append(
            (
                sid, AGENTS[rng.randrange(3)], "1.0", MODELS[rng.randrange(3)], "default",
                REPOS[rng.randrange(12)], f"{i:040x}", head, "main", raw, raw, done,
                _stamp(started), _stamp(ended), b"{}", f"{i:064x}", _stamp(ended), status,
                verdict_id, latest_id, verified,
            )
        )  # fmt: skip
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        connection.executemany(
            f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({', '.join('?' * 21)})",
            session_rows,
        )
        connection.executemany(
            f"INSERT INTO verification_runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * 11)})",
            run_rows,
        )
        connection.executemany(
            "INSERT INTO check_results (run_id, check_name, ordinal, status, duration_s) "
            "VALUES (?, ?, ?, ?, ?)",
            check_rows,
        )
        connection.executemany(
            "INSERT INTO findings (run_id, check_name, ordinal, code, message, path) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            finding_rows,
        )
        for statement in BACKFILL:
            connection.execute(statement)
        connection.execute("COMMIT")
        connection.execute("ANALYZE")
    finally:
        connection.close()
    return url
