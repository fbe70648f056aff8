"""Verdict overrides: appended beside the computed verdict, never over it, on both engines."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import NullPool, create_engine, text
from sqlalchemy.exc import DBAPIError

from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    migrated_postgres_database,
)
from tests.support.report_factory import finished, make_report_bytes
from verifier.contract.report import parse_report
from verifier.errors import BadRequest, NotFound
from verifier.findings import CheckResult, CheckStatus, Finding, Verification
from verifier.store import Store
from verifier.store.overrides import overridden_count, overrides, record_override
from verifier.store.tokens import admin_log

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as opened:
        yield opened


def verification(session_id: str, *, missing: bool) -> Verification:
    changes = (Finding("change.missing", "a.py is absent", "a.py"),) if missing else ()
    checks = {
        "changes": CheckResult(
            "changes", CheckStatus.FAIL if changes else CheckStatus.PASS, changes
        ),
        "tests": CheckResult("tests", CheckStatus.PASS, details={"passed": 1}),
        "audit": CheckResult("audit", CheckStatus.PASS),
    }
    return finished(session_id, checks, T0, seconds=1)


def stored_not_delivered(store: Store, session_id: str = "s1") -> None:
    store.ingest(parse_report(make_report_bytes(session_id, "done")))
    store.record_run(verification(session_id, missing=True))


def test_an_override_stands_beside_the_computed_verdict(store: Store) -> None:
    stored_not_delivered(store)
    stats_before = store.stats(group_by="agent")
    runs_before = store.runs("s1")

    row = record_override(
        store, "s1", status="delivered", reason="a.py moved to b.py", author="cli:ana"
    )

    listed = store.listed("s1")
    assert listed.delivery_status == "not_delivered"
    assert listed.session.override_status == "delivered"
    assert listed.effective_status == "delivered"
    assert store.runs("s1") == runs_before
    assert store.stats(group_by="agent") == stats_before
    assert store.stats().totals.not_delivered == 1
    assert (row.session_id, row.status, row.reason, row.author) == (
        "s1",
        "delivered",
        "a.py moved to b.py",
        "cli:ana",
    )
    assert overrides(store, "s1") == [row]
    assert overridden_count(store) == 1


def test_cleared_withdraws_the_override_and_keeps_the_history(store: Store) -> None:
    stored_not_delivered(store)
    first = record_override(store, "s1", status="delivered", reason="r1", author="cli:ana")
    second = record_override(store, "s1", status="cleared", reason="was wrong", author="cli:bo")

    listed = store.listed("s1")
    assert listed.session.override_status is None
    assert listed.effective_status == "not_delivered"
    assert [o.id for o in overrides(store, "s1")] == [first.id, second.id]
    assert [o.status for o in overrides(store, "s1")] == ["delivered", "cleared"]
    assert overridden_count(store) == 0


def test_each_override_is_in_the_admin_log_with_the_computed_verdict(store: Store) -> None:
    stored_not_delivered(store)
    row = record_override(store, "s1", status="delivered", reason="why", author="token:ci")

    [entry] = [e for e in admin_log(store) if e.action == "session.override"]
    assert (entry.actor, entry.subject) == ("token:ci", "s1")
    assert entry.detail == {
        "override_id": row.id,
        "status": "delivered",
        "reason": "why",
        "computed": "not_delivered",
    }


def test_a_later_run_keeps_the_override_standing(store: Store) -> None:
    stored_not_delivered(store)
    record_override(store, "s1", status="not_delivered", reason="flaky", author="cli:ana")
    store.record_run(verification("s1", missing=False))

    listed = store.listed("s1")
    assert (listed.delivery_status, listed.effective_status) == ("delivered", "not_delivered")


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("status", {"status": "maybe", "reason": "r", "author": "a"}),
        ("reason", {"status": "delivered", "reason": "  ", "author": "a"}),
        ("author", {"status": "delivered", "reason": "r", "author": ""}),
    ],
)
def test_a_bad_override_names_its_field(store: Store, field: str, kwargs: dict[str, str]) -> None:
    stored_not_delivered(store)
    with pytest.raises(BadRequest) as raised:
        record_override(store, "s1", **kwargs)
    assert raised.value.field == field
    assert overrides(store, "s1") == []


def test_overriding_an_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        record_override(store, "nope", status="delivered", reason="r", author="a")


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE verdict_overrides SET status = 'not_delivered'",
        "DELETE FROM verdict_overrides",
    ],
)
def test_overrides_are_append_only_in_the_database(
    store: Store, db_url: str, statement: str
) -> None:
    stored_not_delivered(store)
    record_override(store, "s1", status="delivered", reason="r", author="cli:ana")

    engine = create_engine(db_url, poolclass=NullPool)
    try:
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()
    assert [o.status for o in overrides(store, "s1")] == ["delivered"]


@pytest.mark.postgres
def test_truncating_overrides_is_refused_on_postgresql(tmp_path: Path) -> None:
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url:
        with Store.open(url) as store:
            stored_not_delivered(store)
            record_override(store, "s1", status="delivered", reason="r", author="cli:ana")
        engine = create_engine(url, poolclass=NullPool)
        try:
            with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
                connection.execute(text("TRUNCATE verdict_overrides CASCADE"))
        finally:
            engine.dispose()


def test_the_overridden_count_follows_the_stats_filters(store: Store) -> None:
    for sid, agent, ended in (
        ("a", "fixer", "2026-11-29T10:00:00Z"),
        ("b", "writer", "2026-11-29T10:00:00Z"),
        ("c", "fixer", "2026-11-30T10:00:00Z"),
    ):
        agent_field = {"name": agent, "version": "1", "tool_profile": "default"}
        raw = make_report_bytes(sid, "done", agent=agent_field, ended_at=ended)
        store.ingest(parse_report(raw))
        record_override(store, sid, status="delivered", reason="r", author="cli:ana")
    record_override(store, "b", status="cleared", reason="r", author="cli:ana")

    assert overridden_count(store) == 2
    assert overridden_count(store, agent="fixer") == 2
    assert overridden_count(store, agent="writer") == 0
    assert overridden_count(store, ended_from=datetime(2026, 11, 30, tzinfo=UTC)) == 1
    assert overridden_count(store, ended_to=datetime(2026, 11, 30, tzinfo=UTC), model="") == 1
    assert overridden_count(store, ended_to=datetime(2026, 11, 29, 10, tzinfo=UTC)) == 0
    assert overridden_count(store, repo="shop") == 0
