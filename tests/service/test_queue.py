"""The PostgreSQL queue: procrastinate's schema applied by our migration, jobs deferred in
the ingest's transaction, one waiting job per session, and what /readyz asks of it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import NullPool, create_engine, text

from tests.support.pg import NO_POSTGRES, POSTGRES_URL, postgres_database
from verifier.resources import migrations_dir
from verifier.store.queue import VERIFY_QUEUE, VERIFY_TASK, PostgresQueue, defer, libpq_conninfo

pytestmark = pytest.mark.postgres


def _migration() -> object:
    path = migrations_dir() / "versions" / "0005_procrastinate.py"
    spec = importlib.util.spec_from_file_location("migration_0005", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_migration_applies_procrastinates_schema_of_the_installed_version_byte_for_byte() -> (
    None
):
    """A procrastinate upgrade fails here: add a migration with its sql/migrations/ files,
    and leave 0005 as it is (a migration must do the same thing forever)."""
    from importlib.metadata import version

    import procrastinate

    migration = _migration()
    installed = Path(procrastinate.__file__).parent / "sql" / "schema.sql"
    assert version("procrastinate") == migration.PROCRASTINATE_VERSION  # type: ignore[attr-defined]
    assert installed.read_text(encoding="utf-8") == migration.SCHEMA_SQL  # type: ignore[attr-defined]


def jobs(url: str) -> list[tuple[str, str, str]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT queueing_lock, status::text, args->>'reason' FROM procrastinate_jobs")
            )
            return sorted((r[0], r[1], r[2]) for r in rows)
    finally:
        engine.dispose()


def test_a_second_job_for_a_waiting_session_is_refused_without_aborting_the_transaction(
    pg_url: str,
) -> None:
    engine = create_engine(pg_url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            first = defer(connection, "s-1", "ingest")
            assert defer(connection, "s-1", "reverify") is None  # one already waits
            other = defer(connection, "s-2", "ingest")
            # the transaction is still usable after the refusal, and commits both jobs
            assert connection.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()
    assert first is not None and other is not None
    assert jobs(pg_url) == [("s-1", "todo", "ingest"), ("s-2", "todo", "ingest")]


def test_a_job_rolled_back_with_its_transaction_leaves_nothing(pg_url: str) -> None:
    engine = create_engine(pg_url, poolclass=NullPool)
    try:
        with pytest.raises(RuntimeError), engine.begin() as connection:
            defer(connection, "s-1", "ingest")
            raise RuntimeError("the ingest failed after the job was written")
    finally:
        engine.dispose()
    assert jobs(pg_url) == []


def test_enqueue_says_whether_a_job_was_added_and_a_running_job_does_not_block_a_new_one(
    pg_url: str,
) -> None:
    queue = PostgresQueue(pg_url)
    try:
        assert queue.enqueue("s-1", "reverify") is True
        assert queue.enqueue("s-1", "reverify") is False
        engine = create_engine(pg_url, poolclass=NullPool)
        with engine.begin() as connection:  # a worker takes it: a new request may wait
            connection.execute(text("UPDATE procrastinate_jobs SET status = 'doing'"))
        engine.dispose()
        assert queue.enqueue("s-1", "reverify") is True
    finally:
        queue.close()
    assert jobs(pg_url) == [("s-1", "doing", "reverify"), ("s-1", "todo", "reverify")]


def test_jobs_name_the_task_and_queue_the_workers_run(pg_url: str) -> None:
    queue = PostgresQueue(pg_url)
    try:
        queue.enqueue("s-1", "ingest")
    finally:
        queue.close()
    engine = create_engine(pg_url, poolclass=NullPool)
    with engine.connect() as connection:
        row = connection.execute(
            text("SELECT task_name, queue_name, lock, args FROM procrastinate_jobs")
        ).one()
    engine.dispose()
    assert tuple(row) == (
        VERIFY_TASK,
        VERIFY_QUEUE,
        "s-1",
        {"session_id": "s-1", "reason": "ingest", "after_run": None},
    )


def test_the_queue_is_reachable_on_a_migrated_database_and_says_why_not_otherwise(
    pg_url: str,
) -> None:
    queue = PostgresQueue(pg_url)
    assert queue.reachable() is None
    queue.close()

    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with postgres_database(POSTGRES_URL) as bare:
        queue = PostgresQueue(bare)
        assert "verifier db upgrade" in (queue.reachable() or "")
        queue.close()
    down = PostgresQueue("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
    assert "cannot be reached" in (down.reachable() or "")
    down.close()


def test_the_libpq_conninfo_keeps_every_part_of_the_url(pg_url: str) -> None:
    conninfo = libpq_conninfo(
        "postgresql+psycopg://ann:s%40cret@db.example:6543/verifier?sslmode=require"
    )
    parsed = psycopg.conninfo.conninfo_to_dict(conninfo)
    assert parsed == {
        "host": "db.example",
        "port": "6543",
        "user": "ann",
        "password": "s@cret",
        "dbname": "verifier",
        "sslmode": "require",
    }
    with psycopg.connect(libpq_conninfo(pg_url)) as connection:  # and it connects
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_busy_names_the_sessions_with_a_job_waiting_or_running_only(pg_url: str) -> None:
    queue = PostgresQueue(pg_url)
    engine = create_engine(pg_url, poolclass=NullPool)
    try:
        for session_id in ("s-todo", "s-doing", "s-done"):
            queue.enqueue(session_id, "ingest")
        with engine.begin() as connection:
            connection.execute(
                text(
                    "UPDATE procrastinate_jobs SET status = CASE queueing_lock "
                    "WHEN 's-doing' THEN 'doing' WHEN 's-done' THEN 'succeeded' "
                    "ELSE status END::procrastinate_job_status"
                )
            )
        asked = ["s-todo", "s-doing", "s-done", "s-never"]
        assert queue.busy(asked) == {"s-todo", "s-doing"}
        assert queue.busy([]) == set()
    finally:
        engine.dispose()
        queue.close()
