"""Benchmark: the dashboard's overview page over 100,000 sessions, against its store calls.

The data: a SQLite store of 100,000 sessions filled by `tests.benchmarks.fill`
(a year of end times, three agents, three models, twelve repositories, 92 %
verified with one run each; `session_counts` filled as migration 0004 does),
and a token of each scope.

The subject is ``GET /`` with the read token in the dashboard's cookie, through
FastAPI's `TestClient` on `create_app` (the token looked up, the filters
parsed, `views.overview` in the thread pool, the chart drawn as SVG, the
template rendered with autoescaping). The raw operation is the store calls the
page needs, made directly on a store opened beside it: `Store.stats` by day
(a year is more than 92 days, so by week too), by agent (the table), by each of
agent, model and repository (the filter choices), and the 50 silent failures
from `Store.find_sessions`. Target: <= 1.5x; the absolute time informs.
"""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.fill import fill_sqlite
from tests.benchmarks.timing import Result, Row, measure
from tests.support.api import make_config, make_tokens

SESSIONS = 100_000
TARGET = 1.5


def store_calls(store: object) -> object:
    """What `views.overview` asks the store for with no filter (a year of sessions)."""
    from verifier.store import SessionFilter, Store

    assert isinstance(store, Store)
    daily = store.stats(group_by="day")
    weekly = store.stats(group_by="week")
    table = store.stats(group_by="agent")
    silent = store.find_sessions(
        SessionFilter(done=True, delivery_status="not_delivered"), limit=50
    )
    choices = [store.stats(group_by=d) for d in ("agent", "model", "repo")]
    return daily, weekly, table, silent, choices


def run(tmp: Path, repeat: int) -> Result:
    from fastapi.testclient import TestClient

    from verifier.service.api import create_app
    from verifier.service.dashboard.routes import COOKIE
    from verifier.store import Store

    url = fill_sqlite(tmp / "dashboard.sqlite3", SESSIONS)
    tokens = make_tokens(url)
    with (
        TestClient(create_app(make_config(url)), follow_redirects=False) as client,
        Store.open(url, read_only=True) as store,
    ):
        client.cookies.set(COOKIE, tokens["read"])

        def subject() -> str:
            response = client.get("/")
            assert response.status_code == 200, response.text[:300]
            return response.text

        html = subject()
        daily = store.stats(group_by="day")
        total = daily.totals.total
        assert len(daily.groups) > 92, len(daily.groups)
        assert f'id="total-sessions">{total}<' in html, "the page does not show the total"
        t = measure({"subject": subject, "raw": lambda: store_calls(store)}, repeat)
    row = Row(
        "dashboard",
        f"GET / (overview), read cookie, {SESSIONS:,} sessions (SQLite)",
        t["subject"],
        "the Store.stats calls + find_sessions the page needs",
        t["raw"],
        f"<= {TARGET:g}x",
        t["raw"] * TARGET,
    )
    facts = {
        "page": f"{len(html.encode()) / 1024:.0f} KiB of HTML, {len(daily.groups)} days of "
        "sessions (drawn by week), 50 silent failures listed",
        "absolute": f"{t['subject'] * 1000:.0f} ms per page, {t['raw'] * 1000:.0f} ms of "
        "store calls",
    }
    return Result([row], facts)
