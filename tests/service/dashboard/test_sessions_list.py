"""The list of sessions at /sessions, through FastAPI's TestClient on the seeded store
(SQLite, and PostgreSQL where the server is there): the sessions it shows, and how many,
are the API's `/v1/sessions` with the same filters."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.dashboard_seed import XSS, ingest_at
from tests.support.pages import api, by_id, list_ids, login
from tests.support.report_factory import make_report_bytes
from verifier.contract.report import parse_report
from verifier.store import Store

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

# The list's filters beside the same filters of the API.
SAME: list[tuple[dict[str, str], dict[str, str]]] = [
    ({}, {}),
    ({"verdict": "not_delivered"}, {"delivery_status": "not_delivered"}),
    ({"verdict": "pending"}, {"delivery_status": "pending"}),
    ({"done": "yes"}, {"done": "true"}),
    ({"done": "no", "agent": "repo-fixer"}, {"done": "false", "agent": "repo-fixer"}),
    ({"status": "error"}, {"agent_status": "error"}),
    ({"model": "gemini-2.5-flash", "repo": "calc"}, {"model": "gemini-2.5-flash", "repo": "calc"}),
    ({"model": ""}, {"model": ""}),
    (
        {"from": "2026-11-21", "to": "2026-11-22"},
        {"from": "2026-11-21T00:00:00Z", "to": "2026-11-23T00:00:00Z"},
    ),
    ({"q": "A-"}, {"q": "A-"}),
    (
        {"check": "changes", "code": "change.missing"},
        {"check": "changes", "code": "change.missing"},
    ),
    (
        {"check": "tests", "verdict": "inconclusive"},
        {"check": "tests", "delivery_status": "inconclusive"},
    ),
    ({"agent": XSS}, {"agent": XSS}),
]


def _api_ids(client: TestClient, token: str, **params: str) -> list[str]:
    body = api(client, token, "/v1/sessions", limit="500", **params)
    assert body["next_cursor"] is None
    return [s["session_id"] for s in body["sessions"]]


@pytest.mark.parametrize(("listed", "asked"), SAME)
def test_the_list_shows_the_apis_sessions_for_the_same_filters(
    client: TestClient, tokens: dict[str, str], listed: dict[str, str], asked: dict[str, str]
) -> None:
    login(client, tokens["read"])
    response = client.get("/sessions", params=listed)
    assert response.status_code == 200, response.text
    expected = _api_ids(client, tokens["read"], **asked)
    assert list_ids(response.text) == expected
    assert by_id(response.text, "session-count") == str(len(expected))


def test_pages_of_fifty_follow_the_older_link_to_the_end_without_repeats(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    start = datetime(2026, 10, 1, tzinfo=UTC)
    with Store.open(db_url) as store:
        for n in range(75):
            ingest_at(store, f"bulk-{n:03}", start + timedelta(minutes=n), agent="bulk")
    login(client, tokens["read"])
    seen: list[str] = []
    url: str | None = "/sessions?agent=bulk"
    pages = 0
    while url is not None:
        page = client.get(url).text
        pages += 1
        assert by_id(page, "session-count") == "75"
        seen += list_ids(page)
        found = re.search(r'href="([^"]+)" rel="next"', page)
        url = html.unescape(found.group(1)) if found else None
        if url is not None:
            assert "agent=bulk" in url  # the filters stay on every page
    assert pages == 2
    assert seen == [f"bulk-{n:03}" for n in reversed(range(75))]


@SQLITE_ONLY
def test_the_presets_count_back_24_hours_7_days_or_30_days_from_now(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    now = datetime.now(UTC)
    ages = {"h-2": timedelta(hours=2), "d-3": timedelta(days=3), "d-20": timedelta(days=20)}
    ages["d-40"] = timedelta(days=40)
    with Store.open(db_url) as store:
        for sid, age in ages.items():
            ingest_at(store, sid, now - age, agent="clock")
    login(client, tokens["read"])
    shown = [
        list_ids(client.get("/sessions", params={"agent": "clock", **preset}).text)
        for preset in ({"range": "24h"}, {"range": "7d"}, {"range": "30d"}, {})
    ]
    assert shown == [
        ["h-2"],
        ["h-2", "d-3"],
        ["h-2", "d-3", "d-20"],
        ["h-2", "d-3", "d-20", "d-40"],
    ]


@SQLITE_ONLY
def test_the_preset_links_keep_the_other_filters_and_mark_the_one_chosen(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = html.unescape(client.get("/sessions?agent=patcher&range=7d&q=b").text)
    assert '<a href="/sessions?q=b&agent=patcher&range=24h">24 h</a>' in page
    assert '<a href="/sessions?q=b&agent=patcher&range=7d" aria-current="page">7 d</a>' in page
    assert '<a href="/sessions?q=b&agent=patcher">all time</a>' in page


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("verdict=great", "verdict"),
        ("done=maybe", "done"),
        ("range=5d", "range"),
        ("range=7d&from=2026-11-20", "range"),
        ("from=2026-11-22&to=2026-11-21", "from"),
        ("from=yesterday", "from"),
        ("code=change.missing", "code"),
        ("q=" + "x" * 201, "q"),
        ("agent=a%00b", "agent"),
        ("cursor=not-a-cursor", "cursor"),
    ],
)
def test_a_bad_filter_of_the_list_is_a_400_naming_it(
    client: TestClient, tokens: dict[str, str], query: str, field: str
) -> None:
    login(client, tokens["read"])
    response = client.get(f"/sessions?{query}")
    assert response.status_code == 400
    problem = re.search(r'class="problem" role="alert">([^<]*)<', response.text)
    assert problem is not None and html.unescape(problem.group(1)).startswith(f"{field}: ")


@SQLITE_ONLY
def test_each_row_shows_the_verdict_its_first_finding_and_links_its_page(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get("/sessions", params={"q": "x-1"}).text
    row = re.search(r'<tr data-session="x-1">(.*?)</tr>', page, re.S)
    assert row is not None
    cells: dict[str, Any] = dict(
        re.findall(r'data-label="([^"]+)"[^>]*>(.*?)</t[dh]>', row.group(1), re.S)
    )
    assert 'href="/sessions/x-1"' in cells["Session"]
    assert cells["Verdict"] == "not delivered"
    assert "<code>change.missing</code>" in cells["First finding"]
    # An agent's markup is text, never markup.
    assert html.escape(XSS) in cells["Agent"] and XSS not in page


@SQLITE_ONLY
def test_the_list_is_behind_the_login_and_linked_from_every_page(
    client: TestClient, tokens: dict[str, str]
) -> None:
    assert client.get("/sessions").status_code == 303
    login(client, tokens["read"])
    for path in ("/", "/sessions", "/sessions/a-1"):
        assert '<a href="/sessions">Sessions</a>' in client.get(path).text


def test_the_task_filter_lists_the_sessions_naming_that_task_as_the_api_does(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    with Store.open(db_url) as store:
        for sid, task in (("t-a", "fix-add"), ("t-b", "fix-add"), ("t-c", "other")):
            raw = make_report_bytes(
                sid,
                task_id=task,
                ended_at="2026-10-02T10:00:00Z",
                started_at="2026-10-02T09:00:00Z",
            )
            store.ingest(parse_report(raw))
    login(client, tokens["read"])
    page = client.get("/sessions", params={"task": "fix-add"}).text
    assert list_ids(page) == _api_ids(client, tokens["read"], task="fix-add") == ["t-b", "t-a"]
    assert by_id(page, "session-count") == "2"
    # The row links its task's list; the session page names it.
    assert 'href="/sessions?task=other">other</a>' in client.get("/sessions?q=t-c").text
    shown = client.get("/sessions/t-a").text
    assert '<dd id="task-id"><a href="/sessions?task=fix-add">fix-add</a></dd>' in shown
