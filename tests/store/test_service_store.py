"""The store behind the service: current verdicts, counts, filtered pages, stats, guards.

On real SQLite files and the real PostgreSQL server. The counts kept in
`session_counts` are checked against a count of the sessions themselves after
every kind of move, so an aggregate that drifts from the table fails here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    migrated_postgres_database,
)
from tests.support.report_factory import make_report_bytes, verification_of
from verifier.contract.report import Report, parse_report
from verifier.errors import BadRequest, LostJob, NotFound
from verifier.findings import CheckResult, Finding
from verifier.store import Counts, SessionFilter, Store

MISSING = (Finding("change.missing", "gone"),)
TIMEOUT = CheckResult.error("tests", "tests.timeout", "")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with Store.open(f"sqlite:///{tmp_path / 'store.sqlite3'}") as opened:
            yield opened
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url, Store.open(url) as opened:
        yield opened


def report(
    session_id: str,
    status: str = "done",
    *,
    agent: str = "repo-fixer",
    model: str | None = None,
    repo: str = "calc",
    ended: str = "2026-11-29T10:02:10Z",
    head: str | None = None,
    branch: str | None = None,
) -> Report:
    agent_doc: dict[str, object] = {"name": agent, "version": "0.3.0", "tool_profile": "default"}
    if model is not None:
        agent_doc["model"] = model
    repo_doc: dict[str, object] = {"name": repo, "base_commit": "6f1c" * 10, "head_commit": head}
    if branch is not None:
        repo_doc["branch"] = branch
    raw = make_report_bytes(session_id, status, agent=agent_doc, repo=repo_doc, ended_at=ended)
    return parse_report(raw)


def brute_counts(store: Store) -> Counts:
    """The counts from the sessions themselves, for comparison with the aggregate."""
    total = Counts()
    for listed in store.sessions():
        total += Counts.of(listed.session.done, listed.delivery_status, 1)
    return total


def test_a_session_moves_pending_inconclusive_verdict_and_never_back(store: Store) -> None:
    store.ingest(report("s"))
    assert store.listed("s").delivery_status == "pending"
    assert store.rates() == Counts(total=1, done=1, pending=1)

    store.record_run(verification_of("s", tests=TIMEOUT), reason="ingest")
    assert store.listed("s").delivery_status == "inconclusive"
    store.record_run(verification_of("s", changes=MISSING), reason="retry")
    assert store.listed("s").delivery_status == "not_delivered"
    store.record_run(verification_of("s", tests=TIMEOUT), reason="recheck")
    listed = store.listed("s")
    # An inconclusive run after a verdict never hides it; the latest run says it happened.
    assert listed.delivery_status == "not_delivered"
    assert listed.session.delivery_status == "not_delivered"
    assert listed.latest_run is not None and listed.latest_run.delivery_status.value == (
        "inconclusive"
    )
    store.record_run(verification_of("s"))
    assert store.listed("s").delivery_status == "delivered"
    assert (
        store.rates()
        == brute_counts(store)
        == Counts(total=1, done=1, delivered=1, done_conclusive=1)
    )


def test_counts_match_the_sessions_after_every_kind_of_move(store: Store) -> None:
    for i, status in enumerate(["done", "done", "error", "done", "cancelled", "done"]):
        store.ingest(report(f"s{i}", status, agent=f"agent-{i % 2}", model=f"m{i % 3}"))
    moves = [
        ("s0", verification_of("s0")),
        ("s1", verification_of("s1", changes=MISSING)),
        ("s2", verification_of("s2", tests=TIMEOUT)),
        ("s2", verification_of("s2")),
        ("s3", verification_of("s3", tests=TIMEOUT)),
        ("s0", verification_of("s0", changes=MISSING)),
        ("s0", verification_of("s0", tests=TIMEOUT)),
    ]
    for _, run in moves:
        store.record_run(run)
        assert store.rates() == brute_counts(store)
    rates = store.rates()
    assert (rates.total, rates.pending, rates.inconclusive) == (6, 2, 1)
    assert (rates.delivered, rates.not_delivered, rates.silent_failures) == (1, 2, 2)
    assert rates.done_rate == 2 / 3 and rates.delivered_rate == 1 / 3


def test_a_failing_guard_discards_the_run_and_changes_nothing(store: Store) -> None:
    store.ingest(report("s"))
    seen: list[bool] = []

    def guard(connection: Connection) -> bool:
        seen.append(connection.execute(text("SELECT 1")).scalar() == 1)
        return False

    with pytest.raises(LostJob, match="another worker"):
        store.record_run(verification_of("s"), job_id=7, worker="w1", guard=guard)
    assert seen == [True]
    assert store.runs("s") == [] and store.listed("s").delivery_status == "pending"
    run_id = store.record_run(
        verification_of("s"), reason="ingest", job_id=8, worker="w2", guard=lambda c: True
    )
    (run,) = store.runs("s")
    assert (run.id, run.reason, run.worker) == (run_id, "ingest", "w2")


def test_recording_for_an_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="nope"):
        store.record_run(verification_of("nope"))


def test_on_insert_runs_in_the_insert_transaction_and_only_for_a_new_session(
    store: Store,
) -> None:
    calls: list[int] = []

    def hook(connection: Connection) -> None:
        # The new row is visible inside the transaction that inserts it.
        calls.append(connection.execute(text("SELECT count(*) FROM sessions")).scalar_one())

    assert store.ingest(report("s"), on_insert=hook)[1] is True
    assert store.ingest(report("s"), on_insert=hook)[1] is False
    assert calls == [1]

    def failing(connection: Connection) -> None:
        raise RuntimeError("the queue refused")

    with pytest.raises(RuntimeError):
        store.ingest(report("t"), on_insert=failing)
    with pytest.raises(NotFound):  # the session and its job commit together, or neither
        store.get_session("t")
    assert store.rates().total == 1


def test_find_sessions_filters(store: Store) -> None:
    store.ingest(report("a", agent="x", model="m1", head="ab" * 20, branch="fix"))
    store.ingest(report("b", "error", agent="y", repo="other", ended="2026-11-28T09:00:00Z"))
    store.ingest(report("c", agent="x", ended="2026-11-30T09:00:00Z"))
    store.record_run(verification_of("a", changes=MISSING))

    def ids(**kw: object) -> list[str]:
        page = store.find_sessions(SessionFilter(**kw))  # type: ignore[arg-type]
        return [listed.session.session_id for listed in page.items]

    assert ids() == ["c", "a", "b"]  # the latest ended first
    assert ids(agent="x") == ["c", "a"]
    assert ids(model="m1") == ["a"]
    assert ids(repo="other") == ["b"]
    assert ids(agent_status="error") == ["b"] and ids(done=False) == ["b"]
    assert ids(delivery_status="not_delivered") == ["a"]
    assert ids(delivery_status="pending") == ["c", "b"]
    assert ids(head_commit="ab" * 20) == ["a"] and ids(branch="fix") == ["a"]
    day = datetime(2026, 11, 29, tzinfo=UTC)
    assert ids(ended_from=day, ended_to=day + timedelta(days=1)) == ["a"]
    with pytest.raises(BadRequest) as caught:
        ids(delivery_status="great")
    assert caught.value.field == "delivery_status"
    with pytest.raises(BadRequest) as caught:
        ids(ended_from=datetime(2026, 11, 29))
    assert caught.value.field == "from"


def test_pages_cover_every_session_once_while_sessions_arrive(store: Store) -> None:
    for i in range(23):
        store.ingest(report(f"s{i:02}", ended=f"2026-11-29T10:{i % 5:02}:00Z"))
    seen: list[str] = []
    page = store.find_sessions(limit=5)
    store.ingest(report("late", ended="2026-11-30T00:00:00Z"))  # newer than every page
    while True:
        seen += [listed.session.session_id for listed in page.items]
        if page.next_cursor is None:
            break
        page = store.find_sessions(limit=5, cursor=page.next_cursor)
    assert sorted(seen) == sorted(f"s{i:02}" for i in range(23))
    assert len(seen) == len(set(seen))
    for bad in ("not-a-cursor", "W10", ""):
        with pytest.raises(BadRequest) as caught:
            store.find_sessions(cursor=bad or "e30")
        assert caught.value.field == "cursor"
    with pytest.raises(BadRequest) as caught:
        store.find_sessions(limit=0)
    assert caught.value.field == "limit"


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def test_stats_by_day_week_agent_model_repo_and_range(store: Store) -> None:
    store.ingest(report("mon", agent="x", model="m1", ended="2026-11-23T10:00:00Z"))
    store.ingest(report("sun", agent="y", ended="2026-11-29T23:59:59Z"))
    store.ingest(report("next-mon", "error", agent="x", repo="r2", ended="2026-11-30T00:00:01Z"))
    store.record_run(verification_of("mon"))
    store.record_run(verification_of("sun", changes=MISSING))

    by_day = store.stats(group_by="day")
    assert [(g.key, g.counts.total) for g in by_day.groups] == [
        ("2026-11-23", 1),
        ("2026-11-29", 1),
        ("2026-11-30", 1),
    ]
    assert by_day.totals == store.rates()
    by_week = store.stats(group_by="week")
    assert [(g.key, g.counts.total) for g in by_week.groups] == [
        ("2026-11-23", 2),
        ("2026-11-30", 1),
    ]
    week = by_week.groups[0].counts
    assert (week.delivered, week.not_delivered, week.silent_failures) == (1, 1, 1)
    assert week.delivered_rate == 0.5
    agents = {g.key: g.counts for g in store.stats(group_by="agent").groups}
    assert agents["x"].total == 2 and agents["x"].pending == 1 and agents["y"].total == 1
    assert {g.key for g in store.stats(group_by="model").groups} == {"", "m1"}
    assert {g.key for g in store.stats(group_by="repo").groups} == {"calc", "r2"}
    ranged = store.stats(
        ended_from=_midnight(date(2026, 11, 24)), ended_to=_midnight(date(2026, 11, 30))
    )
    assert ranged.totals.total == 1 and ranged.totals.not_delivered == 1
    assert ranged.groups == []
    with pytest.raises(BadRequest) as caught:
        store.stats(group_by="hour")
    assert caught.value.field == "group_by"
    with pytest.raises(BadRequest) as caught:
        store.stats(ended_from=_midnight(date(2026, 12, 1)), ended_to=_midnight(date(2026, 11, 1)))
    assert caught.value.field == "from"


def test_session_ids_by_state(store: Store) -> None:
    for name in ("a", "b", "c"):
        store.ingest(report(name))
    store.record_run(verification_of("b", tests=TIMEOUT))
    assert store.session_ids("pending") == ["a", "c"]
    assert store.session_ids("inconclusive") == ["b"]
    assert store.session_ids("pending", limit=1) == ["a"]
    with pytest.raises(BadRequest):
        store.session_ids("never")


def test_rejected_reports_are_listed_newest_first_with_their_bytes(store: Store) -> None:
    first = store.reject(b"{not json", source="api", field="$", problem="not JSON")
    second = store.reject(b"x" * 10, source="api", field="$", problem="big", size=99)
    rows = store.rejected()
    assert [r.id for r in rows] == [second, first]
    assert rows[0].report_size == 99 and rows[1].field == "$"
    assert [r.id for r in store.rejected(before_id=second)] == [first]
    assert store.rejected_bytes(first) == b"{not json"
    with pytest.raises(NotFound):
        store.rejected_bytes(second + 100)


def test_concurrent_runs_of_many_sessions_keep_the_counts(store: Store) -> None:
    """Eight threads record runs at once; the row lock orders each session's runs."""
    names = [f"s{i}" for i in range(8)]
    for name in names:
        store.ingest(report(name))
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for step in range(6):
                name = names[(index + step) % len(names)]
                kind = (index + step) % 3
                store.record_run(
                    verification_of(name)
                    if kind == 0
                    else verification_of(name, changes=MISSING)
                    if kind == 1
                    else verification_of(name, tests=TIMEOUT)
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.rates() == brute_counts(store)
    assert sum(len(store.runs(n)) for n in names) == 48


def test_migration_0004_fills_the_verdicts_and_counts_of_an_older_store(store: Store) -> None:
    """Down to 0003 (no verdict columns, no counts) and up again: the backfill must
    give what the store keeps run by run."""
    from tests.support.pg import alembic

    store.ingest(report("a", agent="x", model="m1"))
    store.ingest(report("b", "error", agent="y", ended="2026-11-28T09:00:00Z"))
    store.ingest(report("c", repo="r2"))
    store.record_run(verification_of("a", changes=MISSING))
    store.record_run(verification_of("a", tests=TIMEOUT))
    store.record_run(verification_of("b", tests=TIMEOUT))
    kept = {g: store.stats(group_by=g) for g in (None, "day", "agent", "model", "repo")}
    statuses = {listed.session.session_id: listed.delivery_status for listed in store.sessions()}
    url = store.url
    store.close()

    alembic(url, "downgrade", "0003")
    alembic(url, "upgrade", "head")
    with Store.open(url) as again:
        assert {g: again.stats(group_by=g) for g in kept} == kept
        assert (
            {listed.session.session_id: listed.delivery_status for listed in again.sessions()}
            == statuses
            == {"a": "not_delivered", "b": "inconclusive", "c": "pending"}
        )
        assert again.rates() == brute_counts(again)


def test_a_finding_holding_nul_is_recorded_escaped(store: Store) -> None:
    """A claimed path holding NUL is refused at ingest now (the contract); a finding can
    still quote one (a message naming what the agent wrote). PostgreSQL text cannot
    hold U+0000, so the store writes it escaped, on both engines alike."""
    change = {"path": "calc.py", "action": "create", "sha256_before": None}
    raw = make_report_bytes("s-nul", changes=[{**change, "sha256_after": "a" * 64}])
    store.ingest(parse_report(raw))
    assert store.report_bytes("s-nul") == raw  # the bytes as received
    outside = Finding("change.path_outside_root", "calc\u0000.py: NUL", path="calc\u0000.py")
    store.record_run(verification_of("s-nul", changes=(outside,)))
    (run,) = store.runs("s-nul")
    assert run.findings[0].path == "calc\\x00.py"
    assert run.findings[0].message == "calc\\x00.py: NUL"
    assert store.listed("s-nul").delivery_status == "not_delivered"
