"""A result counts only while its job is held: a worker that lost its job (taken for dead,
its job handed to another) has its result discarded and leaves the job to the new holder."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from procrastinate import App, PsycopgConnector
from procrastinate.jobs import Job, Status
from sqlalchemy import NullPool, create_engine, text

from tests.support.gitrepo import GitRepo
from tests.support.service import QUICK, sessions, write_config
from verifier.app.pipeline import submit
from verifier.config import Config
from verifier.service.worker import HeldJobManager, Runtime, retry_stalled, run_job
from verifier.store import Store
from verifier.store.queue import PostgresQueue, libpq_conninfo

pytestmark = pytest.mark.postgres


def sql(url: str, query: str, **params: Any) -> list[Any]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            result = connection.execute(text(query), params)
            return list(result.mappings()) if result.returns_rows else []
    finally:
        engine.dispose()


def fetch(url: str, worker_id: int) -> Job:
    """What procrastinate's worker does to take the next job."""
    (row,) = sql(url, "SELECT * FROM procrastinate_fetch_job_v2(NULL, :w)", w=worker_id)
    assert row["id"] is not None
    return Job.from_row(dict(row))


def register(url: str) -> int:
    (row,) = sql(url, "SELECT * FROM procrastinate_register_worker_v1()")
    return int(row["worker_id"])


def job_row(url: str) -> dict[str, Any]:
    (row,) = sql(url, "SELECT status::text AS status, worker_id, attempts FROM procrastinate_jobs")
    return dict(row)


def finish(url: str, job: Job) -> None:
    async def go() -> None:
        connector = PsycopgConnector(conninfo=libpq_conninfo(url), min_size=1, max_size=2)
        async with App(connector=connector).open_async():
            await HeldJobManager(connector).finish_job(job, Status.SUCCEEDED, delete_job=False)

    asyncio.run(go())


def test_a_result_from_a_worker_whose_job_went_to_another_is_discarded(
    repo: GitRepo, tmp_path: Path, pg_url: str
) -> None:
    config = Config.load(write_config(tmp_path, repo, QUICK, database_url=pg_url), environ={})
    with Store.open(pg_url) as store:
        queue = PostgresQueue(pg_url)
        submit(store, sessions(repo, 1)[0], "test", queue=queue)
        queue.close()

        first, second = register(pg_url), register(pg_url)
        lost = fetch(pg_url, first)
        # The first worker is taken for dead: the sweep puts its job back, the second takes it.
        sql(pg_url, "SELECT procrastinate_retry_job_v2(:id, now(), NULL, NULL, NULL)", id=lost.id)
        held = fetch(pg_url, second)
        assert held.id == lost.id and held.attempts == lost.attempts + 1

        runtime = Runtime(config, store)
        assert run_job(runtime, lost) == "discarded"
        assert store.runs("s-0000") == []  # nothing recorded from the lost job
        finish(pg_url, lost)  # and its end leaves the job to the second worker
        assert job_row(pg_url) == {"status": "doing", "worker_id": second, "attempts": 1}

        assert run_job(runtime, held) == "delivered"
        (run,) = store.runs("s-0000")
        assert run.delivery_status.value == "delivered"
        finish(pg_url, held)
        assert job_row(pg_url)["status"] == "succeeded"
    stored = sql(pg_url, "SELECT job_id, worker, reason FROM verification_runs")
    assert [dict(r) for r in stored] == [
        {"job_id": held.id, "worker": f"{runtime.name}/{second}", "reason": "ingest"}
    ]


def test_the_same_worker_taking_its_own_job_again_discards_the_older_attempt(
    repo: GitRepo, tmp_path: Path, pg_url: str
) -> None:
    """Held means this worker *and* this attempt: a worker briefly taken for dead may fetch
    its own job again; the run of the older attempt must not count beside the new one."""
    config = Config.load(write_config(tmp_path, repo, QUICK, database_url=pg_url), environ={})
    with Store.open(pg_url) as store:
        queue = PostgresQueue(pg_url)
        submit(store, sessions(repo, 1)[0], "test", queue=queue)
        queue.close()
        worker = register(pg_url)
        older = fetch(pg_url, worker)
        sql(pg_url, "SELECT procrastinate_retry_job_v2(:id, now(), NULL, NULL, NULL)", id=older.id)
        newer = fetch(pg_url, worker)

        runtime = Runtime(config, store)
        assert run_job(runtime, older) == "discarded"
        assert run_job(runtime, newer) == "delivered"
        assert len(store.runs("s-0000")) == 1


def sweep(url: str, stalled_after_s: float) -> int:
    async def go() -> int:
        connector = PsycopgConnector(conninfo=libpq_conninfo(url), min_size=1, max_size=2)
        app = App(connector=connector)
        async with app.open_async():
            return await retry_stalled(app, stalled_after_s)

    return asyncio.run(go())


def test_the_sweep_queues_again_the_jobs_of_a_worker_whose_heartbeat_stopped(
    pg_url: str,
) -> None:
    queue = PostgresQueue(pg_url)
    queue.enqueue("s-1", "ingest")
    queue.enqueue("s-2", "ingest")
    queue.close()
    dead, alive = register(pg_url), register(pg_url)
    fetch(pg_url, dead)
    fetch(pg_url, alive)
    sql(
        pg_url,
        "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = :w",
        w=dead,
    )

    assert sweep(pg_url, 30) == 1
    rows = sql(
        pg_url,
        "SELECT queueing_lock, status::text AS status, attempts, worker_id "
        "FROM procrastinate_jobs ORDER BY id",
    )
    assert [(r["queueing_lock"], r["status"], r["attempts"]) for r in rows] == [
        ("s-1", "todo", 1),  # the dead worker's: back in the queue
        ("s-2", "doing", 0),  # the live worker's: left alone
    ]


def test_a_stalled_job_whose_session_has_another_job_waiting_ends_and_the_other_stays(
    pg_url: str,
) -> None:
    queue = PostgresQueue(pg_url)
    queue.enqueue("s-1", "ingest")
    dead = register(pg_url)
    fetch(pg_url, dead)
    assert queue.enqueue("s-1", "reverify")  # allowed: the first one is no longer waiting
    queue.close()
    sql(pg_url, "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'")

    assert sweep(pg_url, 30) == 0
    rows = sql(
        pg_url,
        "SELECT args->>'reason' AS reason, status::text AS status "
        "FROM procrastinate_jobs ORDER BY id",
    )
    assert [(r["reason"], r["status"]) for r in rows] == [
        ("ingest", "failed"),
        ("reverify", "todo"),
    ]
