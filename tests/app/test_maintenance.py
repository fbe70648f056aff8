"""`verifier.app.maintenance`: the database migrated, copied and pruned from the configuration."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.api import make_config, verification
from tests.support.report_factory import make_report_bytes
from verifier.app import maintenance, pipeline
from verifier.app.maintenance import Cutoff
from verifier.errors import BadRequest, ConfigError
from verifier.store import Store


def test_migrate_creates_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "v.sqlite3"
    maintenance.migrate(make_config(f"sqlite:///{path}"))
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    assert {"sessions", "verification_runs", "admin_log"} <= tables


def test_a_cutoff_keeps_the_text_given_and_refuses_the_future() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    cutoff = Cutoff.parse("2026-11-15", now)
    assert cutoff.text == "2026-11-15" and cutoff.moment == datetime(2026, 11, 15, tzinfo=UTC)
    with pytest.raises(BadRequest, match="in the future"):
        Cutoff.parse("2026-12-02", now)
    with pytest.raises(BadRequest, match="--before"):
        Cutoff.parse("yesterday", now)


def test_prune_asks_with_the_plan_and_changes_nothing_when_told_no(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    with Store.open(url) as store:
        pipeline.submit(store, make_report_bytes("s1"), "test")
        store.record_run(verification("s1"))
    config = make_config(url)
    after = datetime.now(UTC) + timedelta(seconds=-1)
    plans = []

    def no(plan: object) -> bool:
        plans.append(plan)
        return False

    assert maintenance.prune(config, after, actor="cli:al", review=no) is None
    assert plans and plans[0].sessions == 1  # type: ignore[attr-defined]
    with Store.open(url) as store:
        assert store.report_bytes("s1") == make_report_bytes("s1")
    result = maintenance.prune(config, after, actor="cli:al", review=lambda plan: True)
    assert result is not None and result.sessions == 1
    with Store.open(url) as store:
        assert store.get_session("s1").pruned_at is not None


def test_copy_needs_a_postgresql_target(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    maintenance.migrate(make_config(url))
    with pytest.raises(ConfigError, match="PostgreSQL"):
        maintenance.copy(make_config(url), f"sqlite:///{tmp_path / 'other.sqlite3'}")
