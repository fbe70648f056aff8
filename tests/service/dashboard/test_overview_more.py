"""The overview's additions, through FastAPI's TestClient on the seeded store (SQLite, and
PostgreSQL where the server is there): "why sessions fail" counts what the sessions list
shows behind each link, the lines per agent or model are the API's rates for each, and the
presets set the days."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from tests.support.dashboard_seed import XSS
from tests.support.pages import api, by_id, list_ids, login, pct, table

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
VIEWS: list[dict[str, str]] = [
    {},
    {"agent": "repo-fixer"},
    {"model": ""},
    {"repo": "shop", "from": "2026-11-21"},
    {"agent": XSS},
]


def reasons(page: str) -> list[tuple[str, str, int, str]]:
    """The rows of "why sessions fail": (check, code or '', sessions, link)."""
    rows = re.findall(
        r'<tr data-check="([^"]*)" data-code="([^"]*)".*?<a href="([^"]+)" data-col="sessions">'
        r"(\d+)</a>",
        table(page, "reasons"),
        re.S,
    )
    return [
        (html.unescape(check), html.unescape(code), int(n), html.unescape(link))
        for check, code, link, n in rows
    ]


@pytest.mark.parametrize("view", VIEWS)
def test_each_reason_counts_the_sessions_its_link_lists(
    client: TestClient, tokens: dict[str, str], view: dict[str, str]
) -> None:
    login(client, tokens["read"])
    rows = reasons(client.get("/", params=view).text)
    not_delivered = api(client, tokens["read"], "/v1/stats", **view)["not_delivered"]
    if not_delivered:
        assert rows, "sessions were not delivered: the table has their reasons"
    for check, code, sessions, link in rows:
        assert link.startswith("/sessions?") and "verdict=not_delivered" in link
        page = client.get(link).text
        assert by_id(page, "session-count") == str(sessions), (check, code, link)
        listed = list_ids(page)
        assert len(listed) == sessions
        # The same sessions as the API's, for the same filters.
        query = {"delivery_status": "not_delivered", "check": check, "limit": "500"}
        query |= {"code": code} if code else {}
        query |= {k: v for k, v in view.items() if k in ("agent", "model", "repo")}
        if "from" in view:
            query["from"] = view["from"] + "T00:00:00Z"
        body = api(client, tokens["read"], "/v1/sessions", **query)
        assert [s["session_id"] for s in body["sessions"]] == listed


def test_the_check_rows_count_each_session_once_and_codes_follow_their_check(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    rows = reasons(client.get("/").text)
    checks = [r for r in rows if not r[1]]
    # The check most sessions failed first; a tie by the check's name.
    assert [c[0] for c in checks] == ["changes", "audit", "tests"]
    for check, _, sessions, _ in checks:
        codes = [r[2] for r in rows if r[0] == check and r[1]]
        # A session with two codes of one check counts under each code, once under the check.
        assert max(codes) <= sessions <= sum(codes)
    stats = api(client, tokens["read"], "/v1/stats")
    assert all(r[2] <= stats["not_delivered"] for r in rows)


@pytest.mark.parametrize("lines", ["agent", "model"])
def test_a_line_per_agent_or_model_draws_the_apis_rate_for_each(
    client: TestClient, tokens: dict[str, str], lines: str
) -> None:
    login(client, tokens["read"])
    window = {"from": "2026-11-20", "to": "2026-11-24"}
    page = client.get("/", params={**window, "lines": lines}).text
    legend = [html.unescape(k) for k in re.findall(r'data-series="([^"]*)"', page)]
    groups = api(client, tokens["read"], "/v1/stats", group_by=lines, **window)["groups"]
    busiest = sorted(groups, key=lambda g: (-g["total"], g["key"]))
    assert legend == [g["key"] for g in busiest][:6]
    for key in legend:
        params = {"model" if lines == "model" else "agent": key, "group_by": "day", **window}
        days = api(client, tokens["read"], "/v1/stats", **params)["groups"]
        for day in days:
            if day["delivered_rate"] is None:
                continue
            name = key or "(none)"
            title = f"{day['key']}: {name} delivered rate {pct(day['delivered_rate'])} "
            title += f"({day['total']} sessions)"
            assert html.escape(title, quote=False) in page, title
    assert "dot done" not in page  # the overall lines give way to the series


@SQLITE_ONLY
def test_the_presets_set_today_7_or_30_utc_days_and_keep_the_other_filters(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    today = datetime.now(UTC).date()
    page = html.unescape(client.get("/", params={"agent": "patcher", "lines": "model"}).text)
    for days, label in ((1, "today"), (7, "7 d"), (30, "30 d")):
        first = today - timedelta(days=days - 1)
        href = f"/?from={first}&to={today}&agent=patcher&lines=model"
        assert f'<a href="{href}">{label}</a>' in page
    chosen = client.get("/", params={"from": str(today - timedelta(days=6)), "to": str(today)})
    assert re.search(r'aria-current="page">7 d</a>', chosen.text)


@SQLITE_ONLY
def test_a_bad_lines_value_is_a_400_naming_it(client: TestClient, tokens: dict[str, str]) -> None:
    login(client, tokens["read"])
    response = client.get("/?lines=repo")
    assert response.status_code == 400 and "lines: got &#39;repo&#39;" in response.text
