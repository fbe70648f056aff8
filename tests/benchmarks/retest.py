"""Benchmark 7: re-verifying a session whose tree was already tested, against its first run.

The data: the repository and session of benchmark 3 (`verify_cli.build`: 5
modules, 50 pytest tests, a session that fixes one bug and commits), verified
through the pipeline (`verifier.app.pipeline.verify_report`) in this process, as a
worker does, with a SQLite store in a temp dir and the default sandbox.

The subject is a re-verification: the store's test result cache holds this
tree's result, so the tests check reuses it (``cached_from``) instead of
running pytest. The raw operation is the first verification of the same
session: the cache emptied before each, so the tests run. Target: the
re-verification takes at most 5 % of the first run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.benchmarks.timing import Result, Row, measure
from tests.benchmarks.verify_cli import TESTS, build
from verifier.app.pipeline import verify_report
from verifier.config import Config, RepositoryConfig
from verifier.findings import DeliveryStatus
from verifier.store import Store
from verifier.store.models import TestResultCacheModel

TARGET_SHARE = 0.05


def run(tmp: Path, repeat: int) -> Result:
    repo, report = build(tmp / "retest-repo")
    raw = json.dumps(report, ensure_ascii=False).encode("utf-8")
    bench = RepositoryConfig(
        "bench",
        path=repo.path,
        test_command=(sys.executable, "-m", "pytest", "-q"),
        test_timeout_s=120,
    )
    config = Config(
        database_url=f"sqlite:///{tmp / 'store.sqlite3'}", repositories={"bench": bench}
    )
    Store.open(config.database_url).close()  # created and migrated before the timing

    def verify(*, cached: bool) -> None:
        verification = verify_report(raw, config).verification
        tests = verification.checks["tests"]
        assert verification.delivery_status is DeliveryStatus.DELIVERED, tests
        assert ("cached_from" in tests.details) is cached, tests.details

    def first() -> None:
        with Store.open(config.database_url) as store, store.transaction() as session:
            session.query(TestResultCacheModel).delete()
        verify(cached=False)

    def again() -> None:
        verify(cached=True)

    # In turns: each first run empties the cache and fills it again, for the re-verify after it.
    times = measure({"first": first, "again": again}, repeat)
    bound = TARGET_SHARE * times["first"]
    row = Row(
        "retest",
        "re-verify, tree already tested (cached)",
        times["again"],
        f"first verification (pytest, {TESTS} tests)",
        times["first"],
        f"<= {TARGET_SHARE:.0%} of the first run",
        bound,
    )
    facts = {
        "session": f"5 modules, {TESTS} pytest tests, in-process pipeline, SQLite store",
    }
    return Result([row], facts)
