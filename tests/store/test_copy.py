"""`verifier db copy`: a real SQLite store copied into a real, fresh PostgreSQL database."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import NullPool, create_engine, text

from audit.chain import seal
from tests.support.pg import NO_POSTGRES, POSTGRES_URL, postgres_database
from tests.support.report_factory import make_report_bytes
from verifier.contract.report import parse_report
from verifier.errors import ConfigError, InfrastructureError
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding, Verification
from verifier.store import Store
from verifier.store.maintenance import CopyMismatch, _Hasher, copy_store, prune
from verifier.store.models import Base, TestResultCacheModel, TokenModel
from verifier.store.overrides import record_override
from verifier.store.tasks import add_task, list_tasks
from verifier.store.webhooks import NewDelivery, add_deliveries
from verifier.store.witness import witness
from verifier.tasks import Task

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
TABLES = [t.name for t in Base.metadata.sorted_tables]


@pytest.fixture
def pg_url() -> Iterator[str]:
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with postgres_database(POSTGRES_URL) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'embedded.sqlite3'}"


def run_of(session_id: str, status: CheckStatus, excerpt: str = "1 passed") -> Verification:
    finding = () if status is CheckStatus.PASS else (Finding("tests.failed", "2 failed", "t.py"),)
    tests = CheckResult(
        "tests",
        status,
        finding,
        {"output_excerpt": excerpt, "output_sha256": "c" * 64, "duration_s": 0.25},
        duration_s=0.25,
    )
    checks = {"changes": CheckResult("changes", CheckStatus.PASS), "tests": tests}
    verdict = (
        DeliveryStatus.DELIVERED if status is CheckStatus.PASS else DeliveryStatus.NOT_DELIVERED
    )
    return Verification(
        session_id, "done", True, verdict, checks, T0, T0 + timedelta(seconds=1.5), "0.1.0"
    )


def fill(url: str, sessions: int = 12) -> None:
    """A store with a row in every table: sessions with changes and runs (one naming a
    task), one pruned report, a rejected report, blob digests (ids that sort differently by
    collation), a token, a cached test result, admin-log entries, an override, a webhook
    delivery and a task."""
    change = {
        "path": "calc.py",
        "action": "create",
        "sha256_before": None,
        "sha256_after": "b" * 64,
    }
    with Store.open(url) as store:
        for i in range(sessions):
            raw = make_report_bytes(
                f"s-{i:03d}",
                "done" if i % 3 else "error",
                agent={"name": "répare", "model": f"m{i % 2}"},
                ended_at=f"2026-11-{1 + i % 28:02d}T10:02:10Z",
                changes=[{**change, "path": f"f{i}.py"}],
                **({"task_id": "calc-7"} if i == 5 else {}),
            )
            store.ingest(parse_report(raw))
            store.record_run(run_of(f"s-{i:03d}", CheckStatus.PASS if i % 2 else CheckStatus.FAIL))
        store.reject(b"\x00not json", source="upload", field="$", problem="not UTF-8")
        store.add_blob_digests(
            {"Zeta": "1" * 64, "alpha": "2" * 64, "Émile": "3" * 64, "_x": "4" * 64}
        )
        with store.transaction() as session:
            session.add(
                TokenModel(name="ci", scope="ingest", token_sha256="d" * 64, created_by="t")
            )
            session.add(
                TestResultCacheModel(
                    key="e" * 64, session_id="s-001", result={"passed": 2, "é": [1.5]}
                )
            )
        record_override(store, "s-000", status="delivered", reason="é: moved", author="cli:t")
        add_deliveries(
            store,
            [NewDelivery("ops", "https://h.example/x", "verdict", "s-000", 1, b'{"a":1}')],
            T0,
        )
        trail = seal("s-000", [{"kind": "session_start", "ts": "2026-11-01T10:00:00Z"}])
        witness(store, "s-000", [(b"{}", trail[0])], agent="répare")
        add_task(store, Task("calc-7", "calc", ("tests/t.py::test_é",)), actor="cli:test")
        prune(store, datetime(2026, 11, 2, tzinfo=UTC), actor="cli:test")


def counts(url: str) -> dict[str, int]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return {t: connection.scalar(text(f"SELECT count(*) FROM {t}")) or 0 for t in TABLES}
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_every_table_is_copied_and_reads_the_same_through_the_store(
    sqlite_url: str, pg_url: str
) -> None:
    fill(sqlite_url)
    source_counts = counts(sqlite_url)
    assert all(source_counts[t] > 0 for t in TABLES), source_counts
    lines: list[str] = []

    result = copy_store(sqlite_url, pg_url, progress=lines.append, batch_rows=5)

    assert counts(pg_url) == source_counts
    assert {t.table: t.rows for t in result.tables} == source_counts
    assert result.reports_pruned >= 1
    assert result.reports_checked + result.reports_pruned == source_counts["sessions"]
    assert any(line.startswith("copying sessions") for line in lines)
    with Store.open(sqlite_url, read_only=True) as source, Store.open(pg_url) as target:
        assert target.sessions() == source.sessions()
        for listed in source.sessions():
            sid = listed.session.session_id
            assert target.runs(sid) == source.runs(sid)
            if listed.session.ended_at >= datetime(2026, 11, 2, tzinfo=UTC):
                assert target.report_bytes(sid) == source.report_bytes(sid)
        assert target.blob_digests(["Zeta", "alpha", "Émile", "_x"]) == source.blob_digests(
            ["Zeta", "alpha", "Émile", "_x"]
        )
        assert list_tasks(target) == list_tasks(source) != []
        assert target.get_session("s-005").task_id == "calc-7"


@pytest.mark.postgres
def test_the_target_takes_new_rows_after_the_copied_ids(sqlite_url: str, pg_url: str) -> None:
    fill(sqlite_url, sessions=3)
    copy_store(sqlite_url, pg_url)
    with Store.open(pg_url) as target:
        target.ingest(parse_report(make_report_bytes("s-new")))
        run_id = target.record_run(run_of("s-new", CheckStatus.PASS))
        rejected_id = target.reject(b"{", source="upload", field="$", problem="truncated")

    assert run_id == 4 and rejected_id == 2


@pytest.mark.postgres
def test_a_target_with_rows_is_refused_and_left_alone(sqlite_url: str, pg_url: str) -> None:
    fill(sqlite_url, sessions=2)
    copy_store(sqlite_url, pg_url)
    before = counts(pg_url)

    with pytest.raises(ConfigError, match=r"--to: .* is not empty: table \w+ has \d+ rows"):
        copy_store(sqlite_url, pg_url)

    assert counts(pg_url) == before


@pytest.mark.postgres
def test_a_database_holding_other_tables_is_refused_unmigrated(
    sqlite_url: str, pg_url: str
) -> None:
    fill(sqlite_url, sessions=1)
    engine = create_engine(pg_url, poolclass=NullPool)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE invoices (id integer primary key)")

    with pytest.raises(ConfigError, match=r"tables that are not the verifier's \(invoices\)"):
        copy_store(sqlite_url, pg_url)

    with engine.connect() as connection:
        tables = connection.scalars(
            text("SELECT table_name FROM information_schema.tables WHERE table_schema='public'")
        ).all()
    engine.dispose()
    assert tables == ["invoices"]


@pytest.mark.postgres
def test_a_report_that_does_not_match_its_hash_rolls_the_copy_back(
    sqlite_url: str, pg_url: str, tmp_path: Path
) -> None:
    fill(sqlite_url, sessions=4)
    with sqlite3.connect(tmp_path / "embedded.sqlite3") as db:
        db.execute("UPDATE sessions SET report = CAST('{}' AS BLOB) WHERE session_id = 's-003'")

    with pytest.raises(CopyMismatch, match=r"session 's-003': report bytes hash to [0-9a-f]{64}"):
        copy_store(sqlite_url, pg_url)

    assert set(counts(pg_url).values()) == {0}


@pytest.mark.postgres
def test_writes_during_the_copy_are_left_out_whole(sqlite_url: str, pg_url: str) -> None:
    """The source is read as one snapshot: a session stored while the copy runs is
    neither copied nor half copied (its claimed changes without it)."""
    fill(sqlite_url, sessions=3)
    writer = Store.open(sqlite_url)
    late = make_report_bytes(
        "s-late",
        changes=[
            {"path": "x.py", "action": "create", "sha256_before": None, "sha256_after": "f" * 64}
        ],
    )

    def write_between_tables(line: str) -> None:
        if line.startswith("copying sessions"):
            writer.ingest(parse_report(late))

    try:
        result = copy_store(sqlite_url, pg_url, progress=write_between_tables)
    finally:
        writer.close()

    copied = {t.table: t.rows for t in result.tables}
    assert copied["sessions"] == 3 and copied["claimed_changes"] == 3
    assert counts(sqlite_url)["sessions"] == 4
    assert counts(pg_url)["sessions"] == 3


def test_only_a_sqlite_store_goes_to_a_postgresql_url(sqlite_url: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--to: sqlite:///.* is not a PostgreSQL URL"):
        copy_store(sqlite_url, f"sqlite:///{tmp_path / 'other.sqlite3'}")
    with pytest.raises(ConfigError, match=r"^--to: not a database URL"):
        copy_store(sqlite_url, "not a url")
    with pytest.raises(
        ConfigError, match=r"^database_url: postgresql\+psycopg://u:\*\*\*@h/d is not"
    ):
        copy_store("postgresql+psycopg://u:secret@h/d", "postgresql+psycopg://u@h/d")


def test_an_unreachable_target_is_an_infrastructure_error_with_the_password_masked(
    sqlite_url: str,
) -> None:
    fill(sqlite_url, sessions=1)
    with pytest.raises(InfrastructureError) as raised:
        copy_store(sqlite_url, "postgresql+psycopg://postgres:s3cret@127.0.0.1:1/x")
    assert "postgresql+psycopg://postgres:***@127.0.0.1:1/x cannot be used" in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_row_hashes_tell_apart_values_that_concatenate_alike() -> None:
    def digest(*rows: tuple[object, ...]) -> str:
        hasher = _Hasher()
        for row in rows:
            hasher.add(row)
        return hasher.hexdigest()

    assert digest(("ab", "c")) != digest(("a", "bc"))
    assert digest(("1",)) != digest((1,)) != digest((True,))
    assert digest((b"x",)) != digest(("x",))
    assert digest(({"a": 1, "b": 2},)) == digest(({"b": 2, "a": 1},))
    assert digest((1.5,)) != digest((1.5000001,))
    assert digest(("a",), ("b",)) != digest(("b",), ("a",))


def verifier(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
        check=False,
    )


@pytest.mark.postgres
def test_db_copy_command_prints_the_tables_and_progress_on_stderr(
    sqlite_url: str, pg_url: str
) -> None:
    fill(sqlite_url, sessions=2)
    env = {"VERIFIER_DATABASE_URL": sqlite_url, "VERIFIER_COPY_TO": pg_url}

    done = verifier("db", "copy", "--format", "json", env=env)

    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["verified"] is True
    assert {t["table"]: t["rows"] for t in data["tables"]} == counts(sqlite_url)
    assert all(len(t["sha256"]) == 64 for t in data["tables"])
    assert "copying sessions" in done.stderr and "checking every report" in done.stderr

    again = verifier("db", "copy", "--to", pg_url, env={"VERIFIER_DATABASE_URL": sqlite_url})
    assert again.returncode == 2
    assert "is not empty: table" in again.stderr
    assert hashlib.sha256(again.stdout.encode()).hexdigest() == hashlib.sha256(b"").hexdigest()
