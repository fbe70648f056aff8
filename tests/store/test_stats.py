"""Counting sessions (`verifier.store.stats`): the `session_counts` rows a session counts
in, and `Store.stats` filtered by agent, model or repository, in every grouping, equal to
a count made from the sessions themselves, on both engines."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from tests.support.report_factory import make_report_bytes
from verifier.contract.report import parse_report
from verifier.findings import CheckResult, CheckStatus, Finding, Verification, decide
from verifier.store import Counts, Group, Listed, SessionFilter, Stats, Store
from verifier.store.rows import GROUP_BY
from verifier.store.stats import count_rows

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)  # a Monday
AGENTS = ("fixer", "writer")
MODELS = ("gemini-3.5-flash", None)
REPOS = ("calc", "shop")
VERDICTS = ("pending", "delivered", "not_delivered", "inconclusive")


def run(session_id: str, verdict: str, done: bool) -> Verification:
    tests = CheckResult("tests", CheckStatus.PASS, details={"passed": 1})
    changes = CheckResult("changes", CheckStatus.PASS)
    if verdict == "not_delivered":
        missing = Finding("change.missing", "a.py is absent", "a.py")
        changes = CheckResult("changes", CheckStatus.FAIL, (missing,))
    if verdict == "inconclusive":
        tests = CheckResult.error("tests", "tests.timeout", "timed out")
    checks = {"changes": changes, "tests": tests, "audit": CheckResult("audit", CheckStatus.PASS)}
    return Verification(
        session_id=session_id,
        agent_status="done" if done else "error",
        done=done,
        delivery_status=decide(list(checks.values())),
        checks=checks,
        started_at=T0,
        finished_at=T0 + timedelta(seconds=1),
        verifier_version="0.1.0",
    )


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """Sessions over 17 days across every agent, model, repository and verdict."""
    with Store.open(db_url) as opened:
        combos = itertools.product(AGENTS, MODELS, REPOS, VERDICTS, (True, False))
        for n, (agent, model, repo, verdict, done) in enumerate(combos):
            ended = T0 + timedelta(days=n % 17, hours=n % 5)
            session_id = f"s{n:03d}"
            agent_field = {"name": agent, "version": "1", "tool_profile": "default"}
            if model is not None:
                agent_field["model"] = model
            raw = make_report_bytes(
                session_id,
                "done" if done else "error",
                agent=agent_field,
                repo={"name": repo, "base_commit": "6f1c" * 10, "head_commit": None},
                started_at=(ended - timedelta(minutes=3)).isoformat().replace("+00:00", "Z"),
                ended_at=ended.isoformat().replace("+00:00", "Z"),
            )
            opened.ingest(parse_report(raw))
            if verdict != "pending":
                opened.record_run(run(session_id, verdict, done))
        yield opened


def expected(
    sessions: list[Listed],
    group_by: str | None,
    wanted: dict[str, str],
    day_from: date | None,
    day_to: date | None,
) -> Stats:
    """The stats counted one session at a time."""

    def value(item: Listed, dimension: str) -> str:
        row = item.session
        day = row.ended_at.astimezone(UTC).date()
        return {
            "agent": row.agent_name,
            "model": row.agent_model or "",
            "repo": row.repo_name,
            "day": day.isoformat(),
            "week": (day - timedelta(days=day.weekday())).isoformat(),
        }[dimension]

    totals = Counts()
    groups: dict[str, Counts] = {}
    for item in sessions:
        day = item.session.ended_at.astimezone(UTC).date()
        if any(value(item, d) != k for d, k in wanted.items()):
            continue
        if (day_from and day < day_from) or (day_to and day > day_to):
            continue
        counts = Counts.of(item.session.done, item.delivery_status, 1)
        totals += counts
        if group_by is not None:
            key = value(item, group_by)
            groups[key] = groups.get(key, Counts()) + counts
    return Stats(totals, [Group(k, c) for k, c in sorted(groups.items())])


FILTERS = [
    {},
    {"agent": "fixer"},
    {"model": "gemini-3.5-flash"},
    {"model": ""},
    {"repo": "shop"},
    {"agent": "writer", "model": ""},
    {"agent": "fixer", "repo": "calc"},
    {"model": "gemini-3.5-flash", "repo": "shop"},
    {"agent": "writer", "model": "gemini-3.5-flash", "repo": "calc"},
    {"agent": "nobody"},
]


def test_every_filter_and_grouping_equals_a_count_of_the_sessions(store: Store) -> None:
    sessions = store.sessions()
    assert len(sessions) == 64
    for wanted, group_by in itertools.product(FILTERS, (None, *GROUP_BY)):
        got = store.stats(group_by=group_by, **wanted)  # type: ignore[arg-type]
        assert got == expected(sessions, group_by, wanted, None, None), (wanted, group_by)


@pytest.mark.parametrize(
    ("day_from", "day_to"),
    [
        (date(2026, 11, 4), date(2026, 11, 12)),
        (date(2026, 11, 10), None),
        (None, date(2026, 11, 3)),
    ],
)
def test_a_day_range_narrows_every_filter_alike(
    store: Store, day_from: date | None, day_to: date | None
) -> None:
    sessions = store.sessions()
    for wanted, group_by in itertools.product(FILTERS, (None, *GROUP_BY)):
        got = store.stats(day_from=day_from, day_to=day_to, group_by=group_by, **wanted)  # type: ignore[arg-type]
        want = expected(sessions, group_by, wanted, day_from, day_to)
        assert got == want, (wanted, group_by, day_from, day_to)


def test_the_counts_are_not_trivial(store: Store) -> None:
    stats = store.stats(agent="fixer", model="", group_by="repo")
    assert stats.totals.total == 16
    assert {g.key: g.counts.silent_failures for g in stats.groups} == {"calc": 1, "shop": 1}
    assert stats.totals.pending == 4 and stats.totals.inconclusive == 4


def test_a_session_counts_once_per_dimension_under_its_utc_day() -> None:
    # 23:30 at UTC-5 on the 1st is 04:30 UTC on the 2nd: the UTC day is the one counted.
    ended = datetime(2026, 11, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    rows = count_rows(ended, "fixer", None, "calc", True, "delivered", -1)
    assert [(r["dimension"], r["key"]) for r in rows] == [
        ("all", ""),
        ("agent", "fixer"),
        ("model", ""),
        ("repo", "calc"),
    ]
    assert {(r["day"], r["done"], r["delivery_status"], r["sessions"]) for r in rows} == {
        (date(2026, 11, 2), True, "delivered", -1)
    }


def test_each_failure_reason_counts_the_sessions_its_filter_lists(db_url: str) -> None:
    """A row of "why sessions fail" counts what `find_sessions` lists with its check and
    code, each session once per row, from the run its verdict shows."""
    missing = Finding("change.missing", "a.py is absent", "a.py")
    other = Finding("change.undeclared", "b.py changed", "b.py")
    failed = Finding("tests.failed", "1 failed")
    plans = {
        "two-codes": {"changes": (missing, other)},
        "missing-twice": {"changes": (missing, Finding("change.missing", "c.py", "c.py"))},
        "both-checks": {"changes": (other,), "tests": (failed,)},
        "delivered": {},
    }
    with Store.open(db_url) as store:
        for sid, failing in plans.items():
            store.ingest(parse_report(make_report_bytes(sid)))
            checks = {
                name: CheckResult(
                    name,
                    CheckStatus.FAIL if failing.get(name) else CheckStatus.PASS,
                    tuple(failing.get(name, ())),
                )
                for name in ("changes", "tests", "audit")
            }
            store.record_run(
                Verification(
                    sid, "done", True, decide(list(checks.values())), checks, T0, T0, "0.1.0"
                )
            )
        # A later inconclusive run does not hide the verdict run's findings.
        errored = {**checks, "tests": CheckResult.error("tests", "tests.timeout", "timed out")}
        store.record_run(
            Verification(
                "two-codes",
                "done",
                True,
                decide(list(errored.values())),
                errored,
                T0 + timedelta(hours=1),
                T0 + timedelta(hours=1),
                "0.1.0",
            )
        )
        reasons = store.failure_reasons(SessionFilter(delivery_status="not_delivered"))
        assert [(r.check, r.code, r.sessions) for r in reasons] == [
            ("changes", None, 3),
            ("changes", "change.missing", 2),
            ("changes", "change.undeclared", 2),
            ("tests", None, 1),
            ("tests", "tests.failed", 1),
        ]
        for reason in reasons:
            chosen = SessionFilter(
                delivery_status="not_delivered", check=reason.check, code=reason.code
            )
            listed = store.find_sessions(chosen, limit=500).items
            assert len(listed) == reason.sessions == store.count_sessions(chosen)
        assert store.failure_reasons(SessionFilter(delivery_status="delivered")) == []
