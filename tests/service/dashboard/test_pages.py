"""The dashboard's pages through FastAPI's TestClient, on a seeded store (SQLite, and
PostgreSQL where the server is there): every figure shown equals the API's answer on
the same store, with the same filters."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from tests.support.api import bearer
from tests.support.dashboard_seed import PLAN, RICH, RICH_TARGETS, XSS
from tests.support.pages import (
    COLUMNS,
    api,
    by_id,
    group_rows,
    login,
    pct,
    period_figures,
    period_rows,
    shown,
    silent_ids,
    table,
)
from verifier.store import Store
from verifier.store.maintenance import prune
from verifier.store.tokens import list_tokens, revoke_token

# Tests whose answer cannot depend on the database engine run on SQLite only; those that
# compare counts, dates and stored results run on PostgreSQL as well.
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

FILTERS: list[dict[str, str]] = [
    {},
    {"agent": "patcher"},
    {"model": "gemini-2.5-pro"},
    {"repo": "shop"},
    {"from": "2026-11-21", "to": "2026-11-23"},
    # Moments as every face takes them: sessions end at 10:00 UTC, these cut days.
    {"from": "2026-11-21T10:30:00Z", "to": "2026-11-24T12:30:00+02:00"},
    {"agent": "repo-fixer", "repo": "calc", "from": "2026-11-20"},
    {"from": "2026-11-21T12:00:00+02:00"},
    {"agent": XSS},
]


# -- authentication -----------------------------------------------------------------------


@SQLITE_ONLY
@pytest.mark.parametrize("path", ["/", "/sessions/rich-1", "/?agent=patcher&by=repo"])
def test_a_page_without_a_token_redirects_to_the_login_page_and_back(
    client: TestClient, path: str
) -> None:
    response = client.get(path)
    assert response.status_code == 303
    location = urlsplit(response.headers["location"])
    assert location.path == "/login"
    assert parse_qs(location.query)["next"] == [path]
    form = client.get(response.headers["location"])
    assert form.status_code == 200
    assert f'name="next" value="{html.escape(path)}"' in form.text


@SQLITE_ONLY
def test_logging_in_with_a_read_token_sets_a_strict_httponly_cookie(
    client: TestClient, tokens: dict[str, str]
) -> None:
    response = client.post("/login", data={"token": tokens["read"], "next": "/sessions/a-1"})
    assert response.status_code == 303
    assert response.headers["location"] == "/sessions/a-1"
    cookie = response.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "samesite"} <= attributes
    assert "samesite=strict" in cookie.lower() and "path=/" in cookie.lower()
    assert client.get("/sessions/a-1").status_code == 200


@SQLITE_ONLY
def test_logging_out_drops_the_cookie_and_pages_ask_for_a_token_again(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    assert client.get("/").status_code == 200
    response = client.post("/logout")
    assert response.status_code == 303 and response.headers["location"] == "/login"
    assert 'verifier_dashboard=""' in response.headers["set-cookie"]
    assert client.get("/").status_code == 303


@SQLITE_ONLY
def test_an_admin_token_may_look_and_a_bearer_read_token_needs_no_cookie(
    client: TestClient, tokens: dict[str, str]
) -> None:
    assert client.get("/", headers=bearer(tokens["read"])).status_code == 200
    login(client, tokens["admin"])
    assert client.get("/").status_code == 200


@SQLITE_ONLY
@pytest.mark.parametrize("scope", ["ingest", "export"])
def test_a_token_of_another_scope_is_refused_at_login_and_as_a_bearer(
    client: TestClient, tokens: dict[str, str], scope: str
) -> None:
    response = client.post("/login", data={"token": tokens[scope]})
    assert response.status_code == 403
    assert f"has scope {scope!r}; this needs scope 'read'" in html.unescape(response.text)
    assert "set-cookie" not in response.headers
    page = client.get("/", headers=bearer(tokens[scope]))
    assert page.status_code == 403 and "this needs scope" in html.unescape(page.text)


@SQLITE_ONLY
def test_an_unknown_or_empty_token_is_refused_and_named(client: TestClient) -> None:
    unknown = client.post("/login", data={"token": "vrf_" + "x" * 43})
    assert unknown.status_code == 401 and "unknown token" in unknown.text
    empty = client.post("/login", data={"token": ""})
    assert empty.status_code == 400 and "token: got nothing" in empty.text


@SQLITE_ONLY
def test_a_revoked_token_ends_the_dashboard_session_made_with_it(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    login(client, tokens["read"])
    with Store.open(db_url) as store:
        [read] = [t for t in list_tokens(store) if t.scope == "read"]
        revoke_token(store, read.id, actor="test")
    response = client.get("/")
    assert response.status_code == 303 and response.headers["location"].startswith("/login")


@SQLITE_ONLY
@pytest.mark.parametrize(
    "target",
    ["//evil.example/", "https://evil.example/", "\\\\evil", "/\t/evil.example", "/\\evil"],
)
def test_login_never_sends_the_user_to_another_site(
    client: TestClient, tokens: dict[str, str], target: str
) -> None:
    response = client.post("/login", data={"token": tokens["read"], "next": target})
    assert response.status_code == 303 and response.headers["location"] == "/"


# -- headers, assets, the API untouched -----------------------------------------------------


@SQLITE_ONLY
def test_every_page_allows_no_script_and_only_our_own_stylesheet(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    for path in ("/login", "/", "/sessions/rich-1", "/sessions/nope", "/?from=bad"):
        response = client.get(path)
        csp = response.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "style-src 'self'" in csp
        assert "script-src" not in csp and "unsafe-inline" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "<script" not in response.text
        # Nothing from elsewhere: the only absolute URL is the SVG namespace.
        urls = set(re.findall(r"""(?:src|href)=["']([^"']+)""", response.text))
        assert all(u.startswith(("/", "#")) for u in urls), urls


@SQLITE_ONLY
def test_the_stylesheet_and_icon_are_served_without_a_token(client: TestClient) -> None:
    css = client.get("/static/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "@media (max-width: 640px)" in css.text
    assert client.get("/static/favicon.svg").headers["content-type"] == "image/svg+xml"
    assert client.get("/static/../api.py").status_code == 404
    assert client.get("/static/other.css").status_code == 404


@SQLITE_ONLY
def test_the_dashboard_adds_nothing_to_the_api_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert all(p.startswith("/v1/") or p in ("/metrics", "/healthz", "/readyz") for p in paths)


# -- the overview: the API's numbers ----------------------------------------------------------


def test_the_totals_equal_the_apis_stats(client: TestClient, tokens: dict[str, str]) -> None:
    login(client, tokens["read"])
    for filters in FILTERS:
        page = client.get("/", params=filters).text
        stats = api(client, tokens["read"], "/v1/stats", **filters)
        assert stats["total"] > 0, filters
        shown_totals = [
            by_id(page, i)
            for i in ("total-sessions", "done-rate", "delivered-rate", "silent-failures")
        ] + [by_id(page, "inconclusive"), by_id(page, "pending")]
        assert shown_totals == [
            str(stats["total"]),
            pct(stats["done_rate"]),
            pct(stats["delivered_rate"]),
            str(stats["silent_failures"]),
            str(stats["inconclusive"]),
            str(stats["pending"]),
        ], filters


def test_the_table_by_agent_model_or_repository_equals_the_apis_groups(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    for by in ("agent", "model", "repo"):
        for filters in FILTERS[:6]:
            rows = group_rows(client.get("/", params={**filters, "by": by}).text)
            groups = api(client, tokens["read"], "/v1/stats", group_by=by, **filters)["groups"]
            assert groups, (by, filters)
            expected = {g["key"]: {c: shown(g, c) for c in COLUMNS} for g in groups}
            assert rows == expected, (by, filters)


def test_the_figures_behind_the_chart_equal_the_apis_days(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get("/", params={"repo": "calc"}).text
    days = api(client, tokens["read"], "/v1/stats", group_by="day", repo="calc")["groups"]
    assert period_rows(page) == period_figures(days)
    # One point per day and rate with a conclusive session, each titled with its figures.
    chart = re.search(r"<svg class=\"chart\".*?</svg>", page, re.S)
    assert chart is not None
    conclusive = [d for d in days if d["delivered_rate"] is not None]
    assert chart.group(0).count('class="dot delivered"') == len(conclusive)
    first = conclusive[0]
    assert f"{first['key']}: delivered rate {pct(first['delivered_rate'])}" in chart.group(0)


def test_past_92_days_the_chart_shows_weeks_as_the_api_counts_them(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get("/").text
    assert "Delivered against done, by week" in page
    weeks = api(client, tokens["read"], "/v1/stats", group_by="week")["groups"]
    assert len(weeks) >= 2
    assert period_rows(page) == period_figures(weeks)
    # A dot per week with a conclusive session; the weeks between have none.
    chart = re.search(r"<svg class=\"chart\".*?</svg>", page, re.S)
    assert chart is not None and chart.group(0).count('class="dot done"') == len(weeks)


def test_the_silent_failures_are_the_apis_done_but_not_delivered_newest_first(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    for filters in FILTERS:
        page = client.get("/", params=filters).text
        query = {k: v for k, v in filters.items() if k in ("agent", "model", "repo")}
        # The list's `to` is a moment the sessions ended before; a date `to` is its day.
        if "from" in filters:
            query["from"] = filters["from"]
        if "to" in filters:
            day = len(filters["to"]) == 10
            query["to"] = filters["to"] + ("T23:59:59.999999Z" if day else "")
        listed = api(
            client,
            tokens["read"],
            "/v1/sessions",
            done="true",
            delivery_status="not_delivered",
            **query,
        )["sessions"]
        assert silent_ids(page) == [s["session_id"] for s in listed], filters
        stats = api(client, tokens["read"], "/v1/stats", **filters)
        assert len(listed) == stats["silent_failures"], filters


@SQLITE_ONLY
def test_each_silent_failure_shows_its_first_finding(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    rows = table(client.get("/").text, "silent")
    rich = re.search(r'data-session="rich-1">(.*?)</tr>', rows, re.S)
    assert rich is not None
    assert "<code>change.missing</code> calc.py is not at head" in rich.group(1)


@SQLITE_ONLY
def test_sorting_by_a_heading_orders_the_rows_and_keeps_the_filters(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get("/", params={"by": "model", "sort": "delivered_rate", "dir": "asc"}).text
    rates = [
        float(r["delivered_rate"].rstrip(" %"))
        for r in group_rows(page).values()
        if r["delivered_rate"] != "—"
    ]
    assert rates == sorted(rates) and len(rates) >= 3
    assert 'aria-sort="ascending"' in page
    # Every heading's link keeps the grouping; the active one turns the order round.
    groups = table(page, "groups")
    heads = re.findall(r'<th scope="col"[^>]*>\s*<a href="([^"]+)"', groups)
    assert len(heads) == 7 and all("by=model" in html.unescape(h) for h in heads)
    active = [html.unescape(h) for h in heads if "sort=delivered_rate" in html.unescape(h)]
    assert active == ["/?by=model&sort=delivered_rate"]


@SQLITE_ONLY
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_rows_without_a_rate_sort_last_whichever_the_order(
    client: TestClient, tokens: dict[str, str], order: str
) -> None:
    login(client, tokens["read"])
    query = {"by": "model", "sort": "delivered_rate", "dir": order}
    rows = list(group_rows(client.get("/", params=query).text).items())
    assert rows[-1] == ("", {**rows[-1][1], "delivered_rate": "—"})
    rates = [float(r["delivered_rate"].rstrip(" %")) for _, r in rows[:-1]]
    assert rates == sorted(rates, reverse=order == "desc")


def test_a_span_cut_within_days_draws_its_days_as_the_api_counts_them(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    span = {"from": "2026-11-21T10:30:00Z", "to": "2026-11-24T12:30:00+02:00"}
    page = client.get("/", params=span).text
    days = api(client, tokens["read"], "/v1/stats", group_by="day", **span)["groups"]
    assert days and period_rows(page) == period_figures(days)
    # The chart runs from the first day the span touches to the last.
    labels = re.findall(r'<text class="axis"[^>]*>(\d{4}-\d\d-\d\d)</text>', page)
    assert labels[0] == "2026-11-21" and labels[-1] == "2026-11-24"
    # A moment shows in its field as typed, to edit; a day in a calendar field.
    assert f'name="from" type="text" value="{span["from"]}"' in html.unescape(page)
    day = client.get("/", params={"from": "2026-11-21"}).text
    assert 'name="from" type="date" value="2026-11-21"' in day
    listed = client.get("/sessions", params=span).text
    total = api(client, tokens["read"], "/v1/stats", **span)["total"]
    assert by_id(listed, "session-count") == str(total)


def test_a_range_of_centuries_draws_the_weeks_that_hold_sessions(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get("/", params={"from": "1970-01-01", "to": "9998-12-31"}).text
    assert by_id(page, "total-sessions") == str(api(client, tokens["read"], "/v1/stats")["total"])
    labels = re.findall(r'<text class="axis"[^>]*>(\d{4}-\d\d-\d\d)</text>', page)
    assert labels[0] == "2026-05-04" and labels[-1] == "2026-11-23"


@SQLITE_ONLY
def test_a_filter_naming_nothing_stored_shows_as_chosen_and_counts_nothing(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get("/", params={"agent": "nobody"}).text
    assert '<option value="nobody" selected>' in page
    assert by_id(page, "total-sessions") == "0" and by_id(page, "done-rate") == "—"
    assert "no session in this range" in page and "No silent failure in this view." in page


@SQLITE_ONLY
def test_filters_stay_in_the_links_so_a_view_can_be_shared(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get("/", params={"agent": "patcher", "from": "2026-11-21"}).text
    tabs = re.search(r'<nav class="tabs".*?</nav>', page, re.S)
    assert tabs is not None
    links = [html.unescape(h) for h in re.findall(r'href="([^"]+)"', tabs.group(0))]
    assert links and all("from=2026-11-21" in h and "agent=patcher" in h for h in links)
    assert '<option value="patcher" selected>' in page
    assert 'value="2026-11-21"' in page


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-13-01"}, "to"),
        ({"from": "2026-11-25", "to": "2026-11-20"}, "from"),
        ({"by": "colour"}, "by"),
        ({"sort": "price"}, "sort"),
        ({"dir": "up"}, "dir"),
        ({"to": "9999-12-31"}, "to"),
        ({"from": "0001-01-01"}, "from"),
        ({"from": "2026-11-20T10:00:00"}, "from"),
        ({"from": "2026-11-20T10:00:00Z", "to": "2026-11-20T11:00:00+02:00"}, "from"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(
    client: TestClient, tokens: dict[str, str], query: dict[str, str], field: str
) -> None:
    login(client, tokens["read"])
    response = client.get("/", params=query)
    assert response.status_code == 400
    assert f"{field}: " in html.unescape(response.text)


# -- the session page ------------------------------------------------------------------------


@SQLITE_ONLY
def test_the_session_page_puts_the_three_accounts_side_by_side(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get(f"/sessions/{RICH}").text
    changes, calls, entries = (table(page, t) for t in ("changes", "calls", "entries"))
    assert changes.count('<tr id="change-') == 2 and "calc.py" in changes
    assert 'id="call-0"' in calls and 'id="call-1"' in calls
    # The normalised action beside the raw call.
    call0 = re.search(r'id="call-0".*?</tr>', calls, re.S)
    assert call0 is not None
    assert '<span class="kind">write</span>' in call0.group(0)
    assert 'write_file({"content": "x = 1\\n", "path": "calc.py"})' in html.unescape(call0.group(0))
    assert entries.count('<tr id="entry-') == 3
    assert "<caption>" in changes and 'scope="col"' in calls and 'scope="row"' in entries


@SQLITE_ONLY
def test_each_finding_points_at_the_row_it_is_about_and_the_row_back(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get(f"/sessions/{RICH}").text
    for index, anchor in RICH_TARGETS.items():
        item = re.search(rf'<li id="finding-{index}">(.*?)</li>', page, re.S)
        assert item is not None
        assert f'href="#{anchor}"' in item.group(1)
        row = re.search(rf'<tr id="{anchor}" class="flagged">(.*?)</tr>', page, re.S)
        assert row is not None, anchor
        assert f'href="#finding-{index}"' in row.group(1)
    tests_finding = re.search(r'<li id="finding-1">(.*?)</li>', page, re.S)
    assert tests_finding is not None and 'class="goto"' not in tests_finding.group(1)


def test_the_session_page_shows_the_test_counts_log_every_run_and_the_verdict(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get(f"/sessions/{RICH}").text
    detail = api(client, tokens["read"], f"/v1/sessions/{RICH}")
    counts = table(page, "test-counts")
    assert re.findall(r'<td class="num"[^>]*>(\d+)</td>', counts) == [
        str(v) for v in detail["checks"]["tests"]["details"]["counts"].values()
    ]
    assert "FAILED test_calc.py::test_add - assert 3 == 4" in page
    runs = table(page, "runs")
    for run in detail["runs"]:
        assert f'<th scope="row" data-label="Run">{run["id"]}' in runs
        assert run["delivery_status"].replace("_", " ") in runs
    assert by_id(page, "computed-verdict") == detail["delivery_status"].replace("_", " ")
    assert by_id(page, "agent-status") == detail["agent_status"]


def test_an_override_is_shown_beside_the_computed_verdict(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    page = client.get("/sessions/a-2").text
    assert by_id(page, "computed-verdict") == "not delivered"
    assert by_id(page, "override-verdict") == "delivered"
    assert "by reviewer" in page and html.escape("fixed by hand " + XSS) in page
    assert 'id="overrides"' in page
    assert 'id="override-verdict"' not in client.get("/sessions/a-1").text


def test_a_pruned_session_keeps_its_verdict_findings_and_runs_on_its_page(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    with Store.open(db_url) as store:
        # The oldest session alone ended before this cutoff.
        prune(store, datetime(2026, 6, 1, tzinfo=UTC), actor="test")
    login(client, tokens["read"])
    response = client.get("/sessions/o-1")
    assert response.status_code == 200
    assert "its report was pruned on" in html.unescape(response.text)
    assert by_id(response.text, "computed-verdict") == "delivered"
    assert table(response.text, "runs").count('<th scope="row"') == 1
    assert "No change claimed." in response.text


@SQLITE_ONLY
def test_a_pending_session_and_an_unknown_one(client: TestClient, tokens: dict[str, str]) -> None:
    login(client, tokens["read"])
    pending = next(sid for sid, *_, verdict in PLAN if verdict is None)
    page = client.get(f"/sessions/{pending}")
    assert page.status_code == 200 and "Not verified yet." in page.text
    missing = client.get("/sessions/no-such-session")
    assert missing.status_code == 404 and "no-such-session" in html.unescape(missing.text)


# -- what sessions say is rendered inert --------------------------------------------------------


@SQLITE_ONLY
def test_markup_in_agent_names_paths_and_findings_is_rendered_inert(
    client: TestClient, tokens: dict[str, str]
) -> None:
    login(client, tokens["read"])
    escaped = html.escape(XSS, quote=False)
    for path in (
        "/",
        "/?by=model",
        "/?by=repo",
        "/sessions/x-1",
        f"/sessions/{RICH}",
        "/sessions/a-2",
        "/?" + "agent=" + XSS,
    ):
        page = client.get(path).text
        assert XSS not in page, path
        assert "<script" not in page, path
        assert escaped in page, path
