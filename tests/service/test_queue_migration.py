"""Migration 0005: procrastinate's schema on PostgreSQL, nothing on SQLite, all of it
gone on a downgrade, and none of it seen by `alembic check`."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import NullPool, create_engine, inspect, text

from verifier.store import upgrade
from verifier.store.engine import alembic_config, make_engine, migration_connection

QUEUE_TABLES = {
    "procrastinate_jobs",
    "procrastinate_workers",
    "procrastinate_events",
    "procrastinate_periodic_defers",
}


def alembic(url: str, name: str, *args: str) -> None:
    engine = make_engine(url)
    try:
        with migration_connection(engine) as connection:
            getattr(command, name)(alembic_config(connection), *args)
    finally:
        engine.dispose()


def queue_objects(url: str) -> dict[str, set[str]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            tables = {t for t in inspect(connection).get_table_names() if "procrastinate" in t}
            if engine.dialect.name != "postgresql":
                return {"tables": tables}
            functions = connection.execute(
                text("SELECT proname FROM pg_proc WHERE proname LIKE 'procrastinate%'")
            )
            types = connection.execute(
                text("SELECT typname FROM pg_type WHERE typname LIKE 'procrastinate%'")
            )
            return {
                "tables": tables,
                "functions": {row[0] for row in functions},
                "types": {row[0] for row in types if not row[0].startswith("_")},
            }
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_gets_the_queue_and_a_downgrade_takes_all_of_it_away(pg_url: str) -> None:
    found = queue_objects(pg_url)
    assert found["tables"] == QUEUE_TABLES
    assert "procrastinate_defer_jobs_v1" in found["functions"]
    assert "procrastinate_job_status" in found["types"]
    alembic(pg_url, "check")  # procrastinate's tables are not our models: no difference

    alembic(pg_url, "downgrade", "0004")
    gone = queue_objects(pg_url)
    assert gone == {"tables": set(), "functions": set(), "types": set()}
    alembic(pg_url, "upgrade", "head")
    assert queue_objects(pg_url)["tables"] == QUEUE_TABLES


def test_sqlite_has_no_queue_and_its_store_is_at_head(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    upgrade(url)
    assert queue_objects(url) == {"tables": set()}
    alembic(url, "check")
