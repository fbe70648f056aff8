"""Benchmark: a `/metrics` scrape over 100,000 sessions, against the stats reads it stands for.

The data: the dashboard benchmark's SQLite store (`tests.benchmarks.fill`: 100,000
sessions over a year, three agents, three models, twelve repositories, 92 %
verified with one run each; `session_counts` filled as migration 0004 does).

The subject is ``GET /metrics`` with the read token, through FastAPI's
`TestClient` on `create_app`: the token looked up, the counts read, every
family written in the Prometheus text format. The raw operation is what
``GET /v1/stats`` reads for the same figures, made directly on a store opened
beside it: `Store.stats` in all and grouped by agent, by model and by repository
(the four reads the gauges show). Target: <= 1.5x (a scrape is those figures,
written as text); the absolute time informs.
"""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.fill import fill_sqlite
from tests.benchmarks.timing import Result, Row, measure
from tests.support.api import bearer, make_config, make_tokens

SESSIONS = 100_000
TARGET = 1.5


def stats_reads(store: object) -> object:
    """The four `Store.stats` reads behind the session gauges."""
    from verifier.store import Store

    assert isinstance(store, Store)
    return store.stats(), [store.stats(group_by=d) for d in ("agent", "model", "repo")]


def run(tmp: Path, repeat: int) -> Result:
    from fastapi.testclient import TestClient

    from verifier.service.api import create_app
    from verifier.store import Store

    url = fill_sqlite(tmp / "metrics.sqlite3", SESSIONS)
    token = make_tokens(url)["read"]
    with (
        TestClient(create_app(make_config(url))) as client,
        Store.open(url, read_only=True) as store,
    ):

        def subject() -> str:
            response = client.get("/metrics", headers=bearer(token))
            assert response.status_code == 200, response.text[:300]
            return response.text

        text = subject()
        total = store.stats().totals.total
        assert total == SESSIONS, total
        delivered = store.stats().totals.delivered
        assert f'verifier_sessions{{delivery_status="delivered"}} {delivered}.0' in text, (
            "the scrape does not show the stats' figure"
        )
        t = measure({"subject": subject, "raw": lambda: stats_reads(store)}, repeat)
    row = Row(
        "metrics",
        f"GET /metrics, {SESSIONS:,} sessions (SQLite)",
        t["subject"],
        "the four Store.stats reads (all, by agent, model, repository)",
        t["raw"],
        f"<= {TARGET:g}x",
        t["raw"] * TARGET,
    )
    facts = {
        "scrape": f"{len(text.encode()) / 1024:.0f} KiB of text, "
        f"{sum(1 for line in text.splitlines() if line and not line.startswith('#'))} samples",
        "absolute": f"{t['subject'] * 1000:.1f} ms per scrape, {t['raw'] * 1000:.1f} ms of "
        "stats reads",
    }
    return Result([row], facts)
