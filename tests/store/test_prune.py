"""`verifier prune`: old report bytes and test logs go, verdicts, findings and hashes stay.

On real SQLite files and, when VERIFIER_TEST_POSTGRES_URL is set, on PostgreSQL; the
command itself as a real subprocess, and once on a session really verified.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import NullPool, create_engine, select, text
from sqlalchemy.exc import DBAPIError

from tests.support.gitrepo import GitRepo
from tests.support.report_factory import make_report_bytes
from tests.support.sessions import config_toml, fixed_session, to_bytes
from verifier.contract.report import parse_report
from verifier.errors import BadRequest, NotFound, ReportPruned
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding, Verification
from verifier.store import Store
from verifier.store.maintenance import (
    parse_cutoff,
    plan_prune,
    prune,
    strip_test_logs,
)
from verifier.store.models import AdminLogModel

CUTOFF = datetime(2026, 11, 15, tzinfo=UTC)
NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
LOG = "============ 1 failed, 5 passed in 0.31s ============\nAssertionError: é ≠ e\n"


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as opened:
        yield opened


def ingest(store: Store, session_id: str, ended: str) -> bytes:
    raw = make_report_bytes(session_id, ended_at=ended, started_at=ended)
    store.ingest(parse_report(raw))
    return raw


def record(store: Store, session_id: str, *, failed: bool, log: str = LOG) -> int:
    """A run whose tests check kept its output, as verifier/checks/tests/check.py does."""
    output = log.encode()
    findings = (Finding("tests.failed", "1 test failed", "tests/test_calc.py"),) if failed else ()
    tests = CheckResult(
        "tests",
        CheckStatus.FAIL if failed else CheckStatus.PASS,
        findings,
        {
            "exit_code": 1 if failed else 0,
            "counts": {"passed": 5, "failed": 1 if failed else 0},
            "output_excerpt": log,
            "output_sha256": hashlib.sha256(output).hexdigest(),
            "output_bytes": len(output),
        },
        duration_s=0.5,
    )
    checks = {"changes": CheckResult("changes", CheckStatus.PASS), "tests": tests}
    status = DeliveryStatus.NOT_DELIVERED if failed else DeliveryStatus.DELIVERED
    started = datetime(2026, 11, 20, tzinfo=UTC)
    return store.record_run(
        Verification(
            session_id, "done", True, status, checks, started, started + timedelta(seconds=2), "0.1"
        )
    )


def test_old_reports_and_test_logs_go_and_verdicts_findings_and_hashes_stay(store: Store) -> None:
    old_raw = ingest(store, "s-old", "2026-11-01T10:00:00Z")
    new_raw = ingest(store, "s-new", "2026-11-20T10:00:00Z")
    record(store, "s-old", failed=True)
    record(store, "s-old", failed=False)
    record(store, "s-new", failed=False)
    old_runs, new_runs = store.runs("s-old"), store.runs("s-new")

    result = prune(store, CUTOFF, actor="cli:alice", now=NOW)

    assert (result.sessions, result.runs) == (1, 2)
    assert result.report_bytes == len(old_raw)
    assert result.log_bytes == 2 * len(LOG.encode())
    assert result.bytes_freed == len(old_raw) + 2 * len(LOG.encode())
    with pytest.raises(ReportPruned, match=r"pruned on 2026-12-01T09:30:00Z .*cannot be verified"):
        store.report_bytes("s-old")
    assert store.report_bytes("s-new") == new_raw
    assert store.get_session("s-old").report_sha256 == hashlib.sha256(old_raw).hexdigest()
    after = store.runs("s-old")
    for before_run, run in zip(old_runs, after, strict=True):
        details = run.result["checks"]["tests"]["details"]
        assert details["output_excerpt"] is None
        old_details = before_run.result["checks"]["tests"]["details"]
        assert {k: v for k, v in details.items() if k != "output_excerpt"} == {
            k: v for k, v in old_details.items() if k != "output_excerpt"
        }
        assert (run.delivery_status, run.checks, run.findings) == (
            before_run.delivery_status,
            before_run.checks,
            before_run.findings,
        )
    assert store.runs("s-new") == new_runs


def test_sessions_never_verified_keep_their_report(store: Store) -> None:
    raw = ingest(store, "s-pending", "2026-11-01T10:00:00Z")
    ingest(store, "s-old", "2026-11-02T10:00:00Z")
    record(store, "s-old", failed=False)

    plan = plan_prune(store, CUTOFF)
    result = prune(store, CUTOFF, actor="cli:alice", now=NOW)

    assert (plan.sessions, plan.kept_unverified) == (1, 1)
    assert (result.sessions, result.kept_unverified) == (1, 1)
    assert store.report_bytes("s-pending") == raw


def test_pruning_again_changes_nothing_and_keeps_the_first_date(store: Store) -> None:
    ingest(store, "s-old", "2026-11-01T10:00:00Z")
    record(store, "s-old", failed=False)
    prune(store, CUTOFF, actor="cli:alice", now=NOW)

    again = prune(store, CUTOFF, actor="cli:alice", now=NOW + timedelta(days=3))

    assert (again.sessions, again.report_bytes, again.runs, again.log_bytes) == (0, 0, 0, 0)
    with pytest.raises(ReportPruned, match="pruned on 2026-12-01T09:30:00Z"):
        store.report_bytes("s-old")


def test_many_sessions_are_pruned_batch_by_batch(store: Store) -> None:
    sizes = 0
    for i in range(7):
        sizes += len(ingest(store, f"s-{i}", f"2026-11-0{1 + i}T10:00:00Z"))
        record(store, f"s-{i}", failed=False)
    lines: list[str] = []

    result = prune(store, CUTOFF, actor="cli:alice", progress=lines.append, batch=3, now=NOW)

    assert (result.sessions, result.report_bytes, result.runs) == (7, sizes, 7)
    assert lines == [
        "pruned 3 sessions, 3 runs",
        "pruned 6 sessions, 6 runs",
        "pruned 7 sessions, 7 runs",
    ]
    for i in range(7):
        with pytest.raises(ReportPruned):
            store.report_bytes(f"s-{i}")


def test_each_prune_is_in_the_append_only_admin_log(store: Store, db_url: str) -> None:
    ingest(store, "s-old", "2026-11-01T10:00:00Z")
    record(store, "s-old", failed=True)

    result = prune(store, CUTOFF, actor="cli:alice", now=NOW)

    with store.transaction() as session:
        entry = session.get(AdminLogModel, result.admin_log_id)
        assert entry is not None
        assert (entry.actor, entry.action) == ("cli:alice", "store.prune")
        assert entry.detail == {
            "before": "2026-11-15T00:00:00Z",
            "pruned_at": "2026-12-01T09:30:00Z",
            "sessions": 1,
            "report_bytes": result.report_bytes,
            "runs": 1,
            "log_bytes": len(LOG.encode()),
            "kept_unverified": 0,
            "complete": True,
        }
    engine = create_engine(db_url, poolclass=NullPool)
    with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
        connection.execute(text("DELETE FROM admin_log"))
    engine.dispose()


def test_a_session_never_stored_is_not_found_rather_than_pruned(store: Store) -> None:
    with pytest.raises(NotFound, match="'nope' is not stored") as raised:
        store.report_bytes("nope")
    assert not isinstance(raised.value, ReportPruned)


def test_only_the_test_output_is_stripped_from_a_result() -> None:
    result: dict[str, Any] = {
        "delivery_status": "not_delivered",
        "checks": {
            "tests": {"status": "fail", "details": {"output_excerpt": "é\n", "exit_code": 1}},
            "changes": {"status": "pass", "details": {"files": 3}},
            "audit": {"status": "pass", "details": {"output_excerpt": None}},
        },
    }

    stripped, dropped = strip_test_logs(result)

    assert dropped == 3  # "é\n" in UTF-8
    assert stripped["checks"]["tests"]["details"] == {"output_excerpt": None, "exit_code": 1}
    assert stripped["checks"]["changes"] == result["checks"]["changes"]
    assert stripped["checks"]["audit"] == result["checks"]["audit"]
    assert result["checks"]["tests"]["details"]["output_excerpt"] == "é\n"  # not mutated
    assert strip_test_logs(stripped) == (stripped, 0)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("yesterday", "is not a date"),
        ("2026-13-01", "is not a date"),
        ("2026-11-01T10:00:00", "has no UTC offset"),
        ("2027-01-01", "is in the future"),
    ],
)
def test_a_bad_cutoff_names_the_option_and_the_problem(value: str, problem: str) -> None:
    with pytest.raises(BadRequest, match=rf"^--before: '{value}' {problem}"):
        parse_cutoff(value, NOW)


def test_a_cutoff_is_a_date_at_midnight_utc_or_a_datetime_with_its_offset() -> None:
    assert parse_cutoff("2026-11-15", NOW) == CUTOFF
    assert parse_cutoff("2026-11-15T01:00:00+01:00", NOW) == CUTOFF
    assert parse_cutoff("2026-11-15T00:00:00Z", NOW) == CUTOFF


def verifier(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
        check=False,
    )


@pytest.fixture
def embedded() -> Iterator[Store]:
    """The store the command line uses: the test's own SQLite file (tests/conftest.py)."""
    with Store.open(os.environ["VERIFIER_DATABASE_URL"]) as opened:
        ingest(opened, "s-old", "2026-11-01T10:00:00Z")
        record(opened, "s-old", failed=True)
        yield opened


def test_prune_says_to_export_first_and_asks_before_dropping_anything(embedded: Store) -> None:
    declined = verifier("prune", "--before", "2026-11-15", stdin="n\n")

    assert declined.returncode == 1
    assert "export the evidence you must keep before pruning" in declined.stderr
    assert "1 sessions ended before 2026-11-15" in declined.stderr
    assert "nothing was pruned" in declined.stderr
    assert embedded.report_bytes("s-old")

    unanswered = verifier("prune", "--before", "2026-11-15")
    assert unanswered.returncode == 2
    assert "--yes: no answer to the confirmation" in unanswered.stderr
    assert embedded.report_bytes("s-old")

    accepted = verifier("prune", "--before", "2026-11-15", "--format", "json", stdin="y\n")
    assert accepted.returncode == 0, accepted.stderr
    data = json.loads(accepted.stdout)
    assert (data["sessions"], data["runs"], data["log_bytes"]) == (1, 1, len(LOG.encode()))
    assert data["bytes_freed"] == data["report_bytes"] + data["log_bytes"]
    assert data["before"] == "2026-11-15T00:00:00Z"
    with pytest.raises(ReportPruned):
        embedded.report_bytes("s-old")
    with embedded.transaction() as session:
        actors = session.scalars(select(AdminLogModel.actor)).all()
    assert len(actors) == 1 and actors[0].startswith("cli:")


def test_prune_with_yes_does_not_ask_and_prints_what_it_freed(embedded: Store) -> None:
    done = verifier("prune", "--before", "2026-11-15", "--yes")

    assert done.returncode == 0, done.stderr
    assert "Prune them?" not in done.stderr
    assert done.stdout.startswith("pruned 1 sessions ended before 2026-11-15: ")
    assert f"{len(LOG.encode())} bytes of test logs from 1 runs" in done.stdout


def test_prune_refuses_a_date_in_the_future(embedded: Store) -> None:
    done = verifier("prune", "--before", "2999-01-01", "--yes")

    assert done.returncode == 2
    assert "--before: '2999-01-01' is in the future" in done.stderr
    assert embedded.report_bytes("s-old")


def test_a_really_verified_session_loses_its_test_output_and_keeps_its_verdict(
    repo: GitRepo, tmp_path: Path
) -> None:
    """The key pruned is the one the tests check really writes (verifier/checks/tests/check.py)."""
    cfg = config_toml(tmp_path, repo)
    report = tmp_path / "report.json"
    report.write_bytes(to_bytes(fixed_session(repo).report()))
    verified = verifier("verify", str(report), "--config", str(cfg), "--format", "json")
    assert verified.returncode == 0, verified.stderr
    excerpt = json.loads(verified.stdout)["checks"]["tests"]["details"]["output_excerpt"]
    assert "passed" in excerpt
    shown = verifier("show", "s-1", "--config", str(cfg), "--format", "json")
    cutoff = datetime.now(UTC).isoformat()  # after the session ended

    pruned = verifier(
        "prune", "--before", cutoff, "--yes", "--config", str(cfg), "--format", "json"
    )

    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["log_bytes"] == len(excerpt.encode())
    after = verifier("show", "s-1", "--config", str(cfg), "--format", "json")
    assert after.returncode == 0, after.stderr
    before_data, after_data = json.loads(shown.stdout), json.loads(after.stdout)
    assert after_data["runs"][0]["delivery_status"] == "delivered"
    tests_after = after_data["runs"][0]["result"]["checks"]["tests"]["details"]
    tests_before = before_data["runs"][0]["result"]["checks"]["tests"]["details"]
    assert tests_after["output_excerpt"] is None
    assert tests_after["output_sha256"] == tests_before["output_sha256"]
    assert after_data["report_sha256"] == before_data["report_sha256"]


def test_the_store_itself_says_when_a_report_was_pruned(store: Store) -> None:
    """What a re-verification reads (`Store.report_bytes`) refuses with the date, not
    'not stored'."""
    ingest(store, "s-old", "2026-11-01T10:00:00Z")
    record(store, "s-old", failed=False)
    prune(store, CUTOFF, actor="cli:alice", now=NOW)

    with pytest.raises(ReportPruned, match=r"pruned on 2026-12-01T09:30:00Z .*cannot be verified"):
        store.report_bytes("s-old")


def test_pruned_sessions_are_never_offered_for_verification_again(store: Store) -> None:
    """The periodic work takes its sessions from `session_ids`, oldest first: a pruned
    session there would fail every round and fill the batch."""
    from verifier.app.pipeline import reverify
    from verifier.store.queue import LocalQueue

    ingest(store, "s-old", "2026-11-01T10:00:00Z")
    ingest(store, "s-new", "2026-11-20T10:00:00Z")
    record(store, "s-old", failed=False)
    record(store, "s-new", failed=False)
    prune(store, CUTOFF, actor="cli:alice", now=NOW)
    ran: list[str] = []
    queue = LocalQueue(lambda session_id, _reason, _after: ran.append(session_id), 1)

    try:
        assert store.session_ids("delivered") == ["s-new"]
        with pytest.raises(ReportPruned, match="cannot be verified again"):
            reverify(store, "s-old", queue, actor="cli:alice")
        assert queue.queued() == set()
    finally:
        queue.close()
    assert ran == []
