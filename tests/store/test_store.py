"""The store on real SQLite files and, when VERIFIER_TEST_POSTGRES_URL is set, on PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import NullPool, create_engine, text
from sqlalchemy.exc import StatementError

from tests.support.report_factory import make_report_bytes, report_dict, verification_of
from verifier.contract.report import Report, parse_report
from verifier.errors import InfrastructureError, NotFound, SessionConflict
from verifier.findings import (
    CheckResult,
    CheckStatus,
    DeliveryStatus,
    Finding,
)
from verifier.store import Counts, Store

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
SHA_A = "a" * 64
SHA_B = "b" * 64


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as opened:
        yield opened


def report(session_id: str = "s1", status: str = "done", **overrides: object) -> Report:
    return parse_report(make_report_bytes(session_id, status, **overrides))


def test_ingesting_the_same_bytes_twice_keeps_one_session(store: Store) -> None:
    first, created = store.ingest(report())
    again, created_again = store.ingest(report())

    assert (created, created_again) == (True, False)
    assert again == first
    assert [row.session.session_id for row in store.sessions()] == ["s1"]


def test_same_session_id_with_other_bytes_is_a_conflict_and_the_first_report_stands(
    store: Store,
) -> None:
    first, second = report(status="done"), report(status="error")
    store.ingest(first)

    with pytest.raises(SessionConflict) as raised:
        store.ingest(second)

    assert (raised.value.stored_sha256, raised.value.new_sha256) == (first.sha256, second.sha256)
    stored = store.get_session("s1")
    assert (stored.report_sha256, stored.status) == (first.sha256, "done")
    assert store.report_bytes("s1") == first.raw


def test_report_bytes_round_trip_exactly(store: Store) -> None:
    doc = report_dict(
        "s-unicode",
        "terminé",
        agent={"name": "répare-tout 計算", "model": "gemini-3.5-flash"},
        task="Tâche 🚀\r\nsecond line with a NUL \u0000 inside",
    )
    # CRLF between tokens, raw UTF-8, and \r\n and \u0000 escapes inside strings.
    raw = json.dumps(doc, ensure_ascii=False, indent=1).replace("\n", "\r\n").encode() + b"\r\n"
    assert b"\\r\\n" in raw and b"\\u0000" in raw and b"\r\n" in raw
    parsed = parse_report(raw)

    stored, _ = store.ingest(parsed)

    assert store.report_bytes("s-unicode") == raw
    assert stored.report_sha256 == hashlib.sha256(raw).hexdigest()
    assert (stored.agent_name, stored.agent_model) == ("répare-tout 計算", "gemini-3.5-flash")
    assert (stored.raw_status, stored.status, stored.done) == ("terminé", "done", True)


def test_claimed_changes_are_stored_in_the_report_order(store: Store, db_url: str) -> None:
    changes = [
        {"path": "b/new file.py", "action": "create", "sha256_before": None, "sha256_after": SHA_B},
        {"path": "a.py", "action": "modify", "sha256_before": SHA_A, "sha256_after": SHA_B},
    ]
    store.ingest(report(changes=changes))

    engine = create_engine(db_url, poolclass=NullPool)
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT ordinal, path, action, sha256_before, sha256_after FROM claimed_changes"
                " WHERE session_id = 's1' ORDER BY ordinal"
            )
        ).all()
    engine.dispose()
    assert [tuple(row) for row in rows] == [
        (0, "b/new file.py", "create", None, SHA_B),
        (1, "a.py", "modify", SHA_A, SHA_B),
    ]


def test_reverification_adds_a_run_and_keeps_the_previous_one_with_its_findings(
    store: Store,
) -> None:
    store.ingest(report())
    mismatch = Finding("change.hash_mismatch", "a.py differs", "a.py", SHA_A, SHA_B)
    missing = Finding("change.missing", "b.py is absent", "b.py")
    runner = CheckResult.error("tests", "tests.runner_missing", "pytest not found")
    first = verification_of(changes=(mismatch, missing), tests=runner)
    second = verification_of(started_at=T0 + timedelta(hours=1))

    first_id = store.record_run(first)
    second_id = store.record_run(second)

    old, new = store.runs("s1")
    assert (old.id, new.id) == (first_id, second_id) and first_id < second_id
    assert old.findings == (mismatch, missing, runner.findings[0])
    assert old.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert old.checks == {
        "changes": CheckStatus.FAIL,
        "tests": CheckStatus.ERROR,
        "audit": CheckStatus.PASS,
    }
    assert list(old.checks) == ["changes", "tests", "audit"]
    assert old.result == first.to_dict()
    assert (new.delivery_status, new.findings, new.result) == (
        DeliveryStatus.DELIVERED,
        (),
        second.to_dict(),
    )
    assert new.duration_s == 2.5


def test_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.get_session("nope")
    with pytest.raises(NotFound):
        store.runs("nope")
    with pytest.raises(NotFound):
        store.report_bytes("nope")
    with pytest.raises(NotFound):
        store.record_run(verification_of("nope"))


def test_a_later_inconclusive_run_never_hides_the_conclusive_verdict(store: Store) -> None:
    store.ingest(report("older", started_at="2026-11-29T09:00:00Z"))
    store.ingest(report("newer", started_at="2026-11-29T11:00:00Z"))
    store.record_run(verification_of("older", changes=(Finding("change.missing", "gone"),)))
    delivered = store.record_run(verification_of("older"))
    unsure = store.record_run(
        verification_of("older", tests=CheckResult.error("tests", "tests.timeout", ""))
    )

    newer, older = store.sessions()

    assert (newer.session.session_id, newer.verdict_run, newer.latest_run) == ("newer", None, None)
    assert newer.delivery_status == "pending"
    assert older.verdict_run is not None and older.verdict_run.id == delivered
    assert older.latest_run is not None and older.latest_run.id == unsure
    assert older.delivery_status == "delivered"


def test_an_only_inconclusive_session_is_inconclusive(store: Store) -> None:
    store.ingest(report())
    store.record_run(verification_of(tests=CheckResult.error("tests", "tests.timeout", "")))
    (row,) = store.sessions()
    assert row.verdict_run is None and row.delivery_status == "inconclusive"


def test_rates_count_conclusive_sessions_only(store: Store) -> None:
    assert store.rates() == Counts()
    for session_id, status in [("fixed", "done"), ("unsure", "done"), ("gave-up", "error")]:
        store.ingest(report(session_id, status))
    store.ingest(report("waiting", "done"))
    store.ingest(report("silent", "done"))
    store.record_run(verification_of("fixed", changes=(Finding("change.missing", "gone"),)))
    store.record_run(verification_of("fixed"))
    store.record_run(
        verification_of("fixed", tests=CheckResult.error("tests", "tests.timeout", ""))
    )
    store.record_run(
        verification_of("unsure", tests=CheckResult.error("tests", "tests.timeout", ""))
    )
    store.record_run(verification_of("gave-up", changes=(Finding("change.missing", "gone"),)))
    store.record_run(verification_of("silent", changes=(Finding("change.missing", "gone"),)))

    rates = store.rates()
    assert rates == Counts(
        total=5,
        done=4,
        done_conclusive=2,  # of fixed (delivered, then inconclusive), gave-up, silent
        delivered=1,
        not_delivered=2,
        silent_failures=1,  # done and not delivered: "silent"; "gave-up" was not done
        inconclusive=1,
        pending=1,
    )
    assert (rates.conclusive, rates.done_rate, rates.delivered_rate) == (3, 2 / 3, 1 / 3)


def test_blob_digests_are_remembered_once(store: Store) -> None:
    assert store.blob_digests(["a" * 40]) == {}
    store.add_blob_digests({"a" * 40: SHA_A, "b" * 40: SHA_B})
    store.add_blob_digests({"a" * 40: SHA_A})  # again: no conflict
    assert store.blob_digests(["a" * 40, "c" * 40]) == {"a" * 40: SHA_A}
    many = {f"{i:040x}": SHA_A for i in range(1200)}
    store.add_blob_digests(many)
    assert len(store.blob_digests(list(many))) == 1200


def test_a_read_only_store_lists_without_writing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ro.sqlite3'}"
    with Store.open(url) as store:
        store.ingest(report())
        store.record_run(verification_of())
    before = (tmp_path / "ro.sqlite3").read_bytes()
    with Store.open(url, read_only=True) as store:
        (row,) = store.sessions()
        assert row.delivery_status == "delivered"
        with pytest.raises(InfrastructureError, match="readonly"):
            store.ingest(report("s2"))
    assert (tmp_path / "ro.sqlite3").read_bytes() == before
    # SQLite's own shared-memory index may appear beside a WAL database; nothing else.
    assert {p.name for p in tmp_path.iterdir()} <= {
        "ro.sqlite3",
        "ro.sqlite3-wal",
        "ro.sqlite3-shm",
    }


def test_a_read_only_store_behind_the_code_is_a_clear_error(tmp_path: Path) -> None:
    from verifier.errors import ConfigError

    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    with Store.open(url):
        pass
    with sqlite3.connect(tmp_path / "old.sqlite3") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    with pytest.raises(ConfigError, match="run `verifier db upgrade`"):
        Store.open(url, read_only=True)


def test_times_come_back_aware_in_utc(store: Store) -> None:
    paris = timezone(timedelta(hours=2))
    store.ingest(report(started_at="2026-11-29T10:00:00.000+00:00"))
    store.record_run(verification_of(started_at=datetime(2026, 11, 29, 12, 5, tzinfo=paris)))

    (run,) = store.runs("s1")
    stored = store.get_session("s1")
    for value in (stored.started_at, stored.ended_at, stored.ingested_at, run.started_at):
        assert value.utcoffset() == timedelta(0)
    assert stored.started_at == datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    assert run.started_at == T0 and run.started_at.tzinfo == UTC
    assert run.finished_at == T0 + timedelta(seconds=2.5)


def test_a_naive_time_is_refused_rather_than_guessed(store: Store) -> None:
    store.ingest(report())

    with pytest.raises(StatementError, match="naive datetime"):
        store.record_run(verification_of(started_at=datetime(2026, 11, 29, 10, 5)))
    assert store.runs("s1") == []


def test_concurrent_ingests_of_one_report_store_it_once(db_url: str) -> None:
    Store.open(db_url).close()  # migrate first: this test is about ingesting
    barrier = threading.Barrier(6)
    outcomes: list[bool] = []
    errors: list[BaseException] = []

    def ingest() -> None:
        try:
            with Store.open(db_url) as store:
                barrier.wait()
                outcomes.append(store.ingest(report())[1])
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=ingest) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sorted(outcomes) == [False] * 5 + [True]
