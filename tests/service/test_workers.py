"""`verifier worker` processes on one PostgreSQL database: every session verified exactly
once, however many workers share the queue, and whichever of them is killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import NullPool, create_engine, text

from tests.support.gitrepo import GitRepo
from tests.support.service import (
    QUICK,
    block_once,
    blocked_pids,
    kill_quietly,
    libpq_secret_parts,
    logs_of,
    sessions,
    start_worker,
    stop,
    wait_for,
    workers,
    write_config,
)
from verifier.app.pipeline import submit
from verifier.config import Config
from verifier.store import Store
from verifier.store.queue import PostgresQueue

pytestmark = pytest.mark.postgres


def ingest(url: str, reports: list[bytes]) -> None:
    """Store the reports as the API does: each session and its job in one transaction."""
    queue = PostgresQueue(url)
    try:
        with Store.open(url) as store:
            for raw in reports:
                submit(store, raw, "test", queue=queue)
    finally:
        queue.close()


def runs(url: str) -> list[tuple[str, str, str | None, int | None]]:
    """(session, verdict, worker, job) of every run."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT session_id, delivery_status, worker, job_id FROM verification_runs")
            )
            return [tuple(row) for row in rows]  # type: ignore[misc]
    finally:
        engine.dispose()


def job_statuses(url: str) -> Counter[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT status::text FROM procrastinate_jobs "
                    "WHERE task_name = 'verifier.verify_session'"
                )
            )
            return Counter(row[0] for row in rows)
    finally:
        engine.dispose()


def pending(url: str) -> int:
    with Store.open(url) as store:
        return len(store.session_ids("pending", limit=100_000))


@contextmanager
def watching(url: str) -> Iterator[Callable[[], int]]:
    """`pending`, polled through one store kept open while the workers work: a store opened
    for each poll (ten a second) cost 12 ms of CPU and a server connection each time."""
    with Store.open(url) as store:
        yield lambda: len(store.session_ids("pending", limit=100_000))


def pid_of(worker_label: str | None) -> int:
    """The process id in a run's worker label (host:pid/worker id)."""
    assert worker_label is not None
    return int(worker_label.split(":")[1].split("/")[0])


def test_four_workers_verify_two_hundred_sessions_each_exactly_once(
    repo: GitRepo, tmp_path: Path, pg_url: str
) -> None:
    config = write_config(tmp_path, repo, QUICK)
    ingest(pg_url, sessions(repo, 200))
    assert pending(pg_url) == 200

    with workers(4, config, pg_url, tmp_path / "logs") as procs:
        try:
            with watching(pg_url) as now:
                wait_for("every session verified", lambda: now() == 0)
        except AssertionError:
            raise AssertionError(logs_of(tmp_path / "logs")) from None
        pids = {p.pid for p in procs}

    done = runs(pg_url)
    per_session = Counter(session for session, *_ in done)
    assert len(per_session) == 200 and set(per_session.values()) == {1}
    assert {verdict for _, verdict, _, _ in done} == {"delivered"}
    assert {pid_of(worker) for _, _, worker, _ in done} <= pids
    assert len({pid_of(worker) for _, _, worker, _ in done}) > 1  # the work was shared
    assert len({job for *_, job in done}) == 200  # each run names its own job
    assert job_statuses(pg_url) == Counter(succeeded=200)


def test_a_worker_killed_mid_run_leaves_its_session_to_another_which_records_the_one_run(
    repo: GitRepo, tmp_path: Path, pg_url: str
) -> None:
    blocker = tmp_path / "block"
    config = write_config(tmp_path, repo, block_once(blocker))
    ingest(pg_url, sessions(repo, 1))
    logs = tmp_path / "logs"
    logs.mkdir()
    first = start_worker(config, pg_url, logs / "first.log")
    second: subprocess.Popen[bytes] | None = None
    test_pid = 0
    try:
        test_pid, worker_pid = wait_for("the first test run", lambda: blocked_pids(blocker))
        assert worker_pid == first.pid  # the test runs, blocked, under the first worker
        second = start_worker(config, pg_url, logs / "second.log")
        first.send_signal(signal.SIGKILL)
        first.wait()
        try:
            with watching(pg_url) as now:
                wait_for("the session verified", lambda: now() == 0)
        except AssertionError:
            raise AssertionError(logs_of(logs)) from None
        (run,) = runs(pg_url)
        assert run[1] == "delivered" and pid_of(run[2]) == second.pid
        assert job_statuses(pg_url) == Counter(succeeded=1)
    finally:
        kill_quietly(test_pid)  # a killed worker's test run outlives it: no parent to kill it
        stop([p for p in (first, second) if p is not None])


def test_sigterm_stops_a_worker_within_15_s_and_its_job_is_run_by_another(
    repo: GitRepo, tmp_path: Path, pg_url: str
) -> None:
    blocker = tmp_path / "block"
    config = write_config(tmp_path, repo, block_once(blocker))
    ingest(pg_url, sessions(repo, 1))
    logs = tmp_path / "logs"
    logs.mkdir()
    first = start_worker(config, pg_url, logs / "first.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        test_pid, _ = wait_for("the first test run", lambda: blocked_pids(blocker))
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=15) == 0, logs_of(logs)  # the bound for a stop
        with pytest.raises(ProcessLookupError):
            os.kill(test_pid, 0)  # its test run was killed, not left behind
        assert runs(pg_url) == []  # nothing recorded for the interrupted run
        assert job_statuses(pg_url) == Counter(todo=1)  # released, not failed

        second = start_worker(config, pg_url, logs / "second.log")
        with watching(pg_url) as now:
            wait_for("the session verified", lambda: now() == 0)
        (run,) = runs(pg_url)
        assert run[1] == "delivered" and pid_of(run[2]) == second.pid
        assert job_statuses(pg_url) == Counter(succeeded=1)
    finally:
        stop([p for p in (first, second) if p is not None])


def test_the_test_command_never_sees_the_database_url_or_its_password(
    repo: GitRepo, tmp_path: Path, pg_url: str
) -> None:
    """In the sandbox, the run's own environment, and its parent's (the worker's, which
    holds the URL) is out of its sight; what it printed is in the stored run."""
    dump = (
        "import os\n"
        "print('ENV', dict(os.environ))\n"
        "print('SELF', open('/proc/self/environ').read())\n"
        "try:\n"
        "    print('PARENT', open(f'/proc/{os.getppid()}/environ').read())\n"
        "except OSError as exc:\n"
        "    print('PARENT unreadable', exc)\n"
        "print('PROCS', sorted(os.listdir('/proc')))\n"
    )
    config = write_config(tmp_path, repo, ["{python}", "-c", dump], isolation="required")
    ingest(pg_url, sessions(repo, 1))
    with workers(1, config, pg_url, tmp_path / "logs"), watching(pg_url) as now:
        wait_for("the session verified", lambda: now() == 0)
    with Store.open(pg_url) as store:
        (run,) = store.runs("s-0000")
    assert run.delivery_status.value == "delivered", run.result["checks"]["tests"]
    stored = json.dumps(run.result)
    assert "ENV" in stored and "PARENT" in stored  # what the command saw is all there
    assert "VERIFIER_DATABASE_URL" not in stored
    for secret in libpq_secret_parts(pg_url):
        assert secret not in stored


def test_worker_refuses_an_embedded_sqlite_store_and_says_serve_does_it(
    repo: GitRepo, tmp_path: Path
) -> None:
    config = write_config(tmp_path, repo, QUICK)
    sqlite = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    from tests.support.service import environment

    out = subprocess.run(
        [QUICK[0], "-m", "verifier", "worker"],
        env=environment(config, sqlite),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "needs a PostgreSQL database" in out.stderr and "verifier serve" in out.stderr
    assert Config.load(config).service.stalled_after_s == 2
