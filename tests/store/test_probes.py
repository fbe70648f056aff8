"""What /metrics reads (`verifier.store.probes`): the runs counted by verdict from their
index, never by reading every run with its result."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from verifier.store import Store
from verifier.store.probes import RUNS_BY_VERDICT


def test_the_runs_are_counted_by_verdict_from_the_index_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    with Store.open(url) as store, store.connection() as connection:
        sql = str(RUNS_BY_VERDICT.compile(dialect=connection.dialect))
        rows = connection.execute(text(f"EXPLAIN QUERY PLAN {sql}"))
        plan = " ".join(row[-1] for row in rows)
    assert "USING COVERING INDEX ix_verification_runs_delivery_status" in plan, plan
