"""The store on real SQLite files and, when VERIFIER_TEST_POSTGRES_URL is set, on PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import NullPool, create_engine, text
from sqlalchemy.exc import StatementError
from store.pg import NO_POSTGRES, POSTGRES_URL, postgres_database
from store.report_factory import make_report_bytes, report_dict

from verifier.contract import Report, parse_report
from verifier.errors import NotFound, SessionConflict
from verifier.findings import (
    CheckResult,
    CheckStatus,
    DeliveryStatus,
    Finding,
    Verification,
    decide,
)
from verifier.store import Rates, Store, upgrade

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
SHA_A = "a" * 64
SHA_B = "b" * 64


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite3'}"
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with postgres_database(POSTGRES_URL) as url:
        upgrade(url)  # a PostgreSQL store is migrated by `verifier db upgrade`, not by open
        yield url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as opened:
        yield opened


def report(session_id: str = "s1", status: str = "done", **overrides: object) -> Report:
    return parse_report(make_report_bytes(session_id, status, **overrides))


def verification(
    session_id: str = "s1",
    changes: tuple[Finding, ...] = (),
    tests: CheckResult | None = None,
    started_at: datetime = T0,
) -> Verification:
    checks = {
        "changes": CheckResult(
            "changes", CheckStatus.FAIL if changes else CheckStatus.PASS, changes
        ),
        "tests": tests or CheckResult("tests", CheckStatus.PASS, details={"passed": 6}),
        "audit": CheckResult("audit", CheckStatus.PASS),
    }
    return Verification(
        session_id=session_id,
        agent_status="done",
        done=True,
        delivery_status=decide(list(checks.values())),
        checks=checks,
        started_at=started_at,
        finished_at=started_at + timedelta(seconds=2.5),
        verifier_version="0.1.0",
    )


def test_ingesting_the_same_bytes_twice_keeps_one_session(store: Store) -> None:
    first, created = store.ingest(report())
    again, created_again = store.ingest(report())

    assert (created, created_again) == (True, False)
    assert again == first
    assert [row.session_id for row, _ in store.latest_runs()] == ["s1"]


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
    first = verification(changes=(mismatch, missing), tests=runner)
    second = verification(started_at=T0 + timedelta(hours=1))

    first_id = store.record_run(first)
    second_id = store.record_run(second)

    old, new = store.runs("s1")
    assert (old.id, new.id) == (first_id, second_id) and first_id < second_id
    assert old.findings == (mismatch, missing, runner.findings[0])
    assert (old.delivery_status, old.changes_status, old.tests_status, old.audit_status) == (
        DeliveryStatus.NOT_DELIVERED,
        CheckStatus.FAIL,
        CheckStatus.ERROR,
        CheckStatus.PASS,
    )
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
        store.record_run(verification("nope"))


def test_latest_runs_pairs_each_session_with_its_latest_run(store: Store) -> None:
    store.ingest(report("older", started_at="2026-11-29T09:00:00Z"))
    store.ingest(report("newer", started_at="2026-11-29T11:00:00Z"))
    store.record_run(verification("older", changes=(Finding("change.missing", "gone"),)))
    latest = store.record_run(verification("older"))

    listing = store.latest_runs()

    assert [(row.session_id, run and run.id) for row, run in listing] == [
        ("newer", None),
        ("older", latest),
    ]


def test_rates_judge_each_session_by_its_latest_run(store: Store) -> None:
    assert store.rates() == Rates(0, 0, 0, 0, 0, 0, None, None)
    for session_id, status in [("fixed", "done"), ("unsure", "done"), ("gave-up", "error")]:
        store.ingest(report(session_id, status))
    store.ingest(report("waiting", "done"))
    store.record_run(verification("fixed", changes=(Finding("change.missing", "gone"),)))
    store.record_run(verification("fixed"))
    store.record_run(verification("unsure", tests=CheckResult.error("tests", "tests.timeout", "")))
    store.record_run(verification("gave-up", changes=(Finding("change.missing", "gone"),)))

    assert store.rates() == Rates(
        sessions=4,
        done=3,
        delivered=1,
        not_delivered=1,
        inconclusive=1,
        unverified=1,
        done_rate=0.75,
        delivered_rate=0.25,
    )


def test_times_come_back_aware_in_utc(store: Store) -> None:
    paris = timezone(timedelta(hours=2))
    store.ingest(report(started_at="2026-11-29T10:00:00.000+00:00"))
    store.record_run(verification(started_at=datetime(2026, 11, 29, 12, 5, tzinfo=paris)))

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
        store.record_run(verification(started_at=datetime(2026, 11, 29, 10, 5)))
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
