"""Counting sessions (`verifier.store.stats`): the `session_counts` rows a session counts
in, and `Store.stats` filtered by agent, model or repository, in every grouping, equal to
a count made from the sessions themselves, on both engines."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.support.report_factory import make_report_bytes
from verifier.contract.report import parse_report
from verifier.errors import BadRequest
from verifier.findings import CheckResult, CheckStatus, Finding, Verification, decide
from verifier.store import Counts, Group, Listed, SessionFilter, Stats, Store
from verifier.store.rows import GROUP_BY
from verifier.store.stats import bounds, count_rows

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
    ended_from: datetime | None,
    ended_to: datetime | None,
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
        ended = item.session.ended_at
        if any(value(item, d) != k for d, k in wanted.items()):
            continue
        if (ended_from and ended < ended_from) or (ended_to and ended >= ended_to):
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


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


# Sessions end from 09:00 to 13:00 (UTC) each day: a bound at 11:30 cuts its day in two.
CUT = timedelta(hours=11, minutes=30)


@pytest.mark.parametrize(
    ("ended_from", "ended_to"),
    [
        # Whole days (midnights): read from the day counts.
        (_midnight(date(2026, 11, 4)), _midnight(date(2026, 11, 13))),
        (_midnight(date(2026, 11, 10)), None),
        (None, _midnight(date(2026, 11, 4))),
        # Moments within a day: the sessions counted, each under the UTC day it ended.
        (_midnight(date(2026, 11, 4)) + CUT, _midnight(date(2026, 11, 12)) + CUT),
        (_midnight(date(2026, 11, 10)) + CUT, None),
        (None, _midnight(date(2026, 11, 3)) + CUT),
        # An offset other than UTC: 01:30 at +02:00 is 23:30 the day before.
        (datetime(2026, 11, 5, 1, 30, tzinfo=timezone(timedelta(hours=2))), None),
    ],
)
def test_a_span_narrows_every_filter_and_grouping_alike(
    store: Store, ended_from: datetime | None, ended_to: datetime | None
) -> None:
    sessions = store.sessions()
    for wanted, group_by in itertools.product(FILTERS, (None, *GROUP_BY)):
        got = store.stats(ended_from=ended_from, ended_to=ended_to, group_by=group_by, **wanted)
        want = expected(sessions, group_by, wanted, ended_from, ended_to)
        assert got == want, (wanted, group_by, ended_from, ended_to)


def test_a_bound_within_a_day_counts_that_days_sessions_of_the_span_only(store: Store) -> None:
    day = _midnight(date(2026, 11, 4))
    whole = {g.key: g.counts.total for g in store.stats(group_by="day").groups}
    after = store.stats(ended_from=day + CUT, ended_to=day + timedelta(days=1), group_by="day")
    before = store.stats(ended_from=day, ended_to=day + CUT, group_by="day")
    [(key, cut)] = [(g.key, g.counts.total) for g in after.groups]
    assert key == "2026-11-04" and 0 < cut < whole[key]
    assert cut + before.totals.total == whole[key]


@pytest.mark.parametrize(
    ("first", "last", "span"),
    [
        ("2026-11-04", "2026-11-12", (datetime(2026, 11, 4), datetime(2026, 11, 13))),
        ("2026-11-04T10:00:00Z", None, (datetime(2026, 11, 4, 10), None)),
        (None, "2026-11-12T08:00:00+02:00", (None, datetime(2026, 11, 12, 6))),
        (
            "2026-11-04T10:00:00z",
            "2026-11-04T10:00:01Z",
            (datetime(2026, 11, 4, 10), datetime(2026, 11, 4, 10, 0, 1)),
        ),
        (" 2026-11-04 ", "2026-11-04", (datetime(2026, 11, 4), datetime(2026, 11, 5))),
        (None, None, (None, None)),
    ],
)
def test_from_and_to_take_a_date_or_a_moment_with_its_offset(
    first: str | None, last: str | None, span: tuple[datetime | None, datetime | None]
) -> None:
    """A date `to` is its whole day: the span ends at the next midnight; a time is the
    moment the sessions ended before. Every bound comes back in UTC."""
    utc = tuple(None if m is None else m.replace(tzinfo=UTC) for m in span)
    assert bounds(first, last) == utc


@pytest.mark.parametrize(
    ("first", "last", "field", "says"),
    [
        ("yesterday", None, "from", "is not a date or an ISO 8601 date and time"),
        (None, "2026-11-04T10:00:00", "to", "has no UTC offset"),
        (None, "2026-13-01", "to", "is not a date"),
        (None, "9999-12-31", "to", "the last day a date can name"),
        ("2026-11-05", "2026-11-04", "from", "expected a moment before to="),
        ("2026-11-04T10:00:00Z", "2026-11-04T12:00:00+02:00", "from", "before to="),
    ],
)
def test_a_bad_from_or_to_is_refused_naming_it(
    first: str | None, last: str | None, field: str, says: str
) -> None:
    with pytest.raises(BadRequest) as refused:
        bounds(first, last)
    assert refused.value.field == field and says in refused.value.problem


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


def test_a_sqlite_store_ingests_and_counts_without_loading_postgresqls_dialect(
    tmp_path: Path,
) -> None:
    # `dialect_insert` imports a dialect's module when asked for: a SQLite store's
    # commands never pay for PostgreSQL's (its first migration may; the store is made first).
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    Store.open(url).close()
    script = (
        "import sys\n"
        "from verifier.contract.report import parse_report\n"
        "from verifier.store import Store\n"
        "from tests.support.report_factory import make_report_bytes\n"
        f"with Store.open({url!r}) as store:\n"
        "    store.ingest(parse_report(make_report_bytes('s1')))\n"
        "    assert store.stats().totals.total == 1, store.stats()\n"
        "print(sorted(m for m in sys.modules if m.startswith('sqlalchemy.dialects.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        cwd=Path(__file__).parents[2],
    )  # fmt: skip
    loaded = done.stdout.strip()
    assert "sqlalchemy.dialects.sqlite" in loaded
    assert "postgresql" not in loaded, loaded
