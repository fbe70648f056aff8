"""On one machine (SQLite), ``serve`` verifies in its own process: sessions as they are
stored, those left pending before it started, and the periodic re-verifications."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.service import QUICK, block_once, blocked_pids, sessions, wait_for, write_config
from verifier.app.pipeline import submit
from verifier.config import Config
from verifier.service.serve import Background
from verifier.service.worker import retry_due
from verifier.store import Store
from verifier.store.queue import LocalQueue

# The periodic work runs when the tests call it, never on its own in the middle of one.
NEVER = "0 0 1 1 *"


def load(path: Path) -> Config:
    return Config.load(path, environ={})


@contextmanager
def background(config: Config) -> Iterator[tuple[Background, Store]]:
    with Store.open(config.database_url) as store:
        started = Background.start(config, store, worker=True)
        try:
            yield started, store
        finally:
            started.stop()


def idle(bg: Background) -> None:
    queue = bg.queue
    assert isinstance(queue, LocalQueue)
    wait_for("the pool idle", lambda: not queue.queued())


def reasons(store: Store, session_id: str) -> list[tuple[str, str | None]]:
    return [
        (run.delivery_status.value, run.result.get("reason", None) or _reason(store, run.id))
        for run in store.runs(session_id)
    ]


def _reason(store: Store, run_id: int) -> str | None:
    from sqlalchemy import select

    from verifier.store.models import RunModel

    with store.transaction() as session:
        return session.scalar(select(RunModel.reason).where(RunModel.id == run_id))


def backoff_passed(store: Store, config: Config) -> bool:
    due = retry_due(store.runs("s-0000"), config.service)
    return due is None or due <= dt.datetime.now(dt.UTC)


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'serve.sqlite3'}"


def test_sessions_stored_while_serving_are_verified_once_each_in_process(
    repo: GitRepo, tmp_path: Path
) -> None:
    config = load(
        write_config(
            tmp_path, repo, QUICK, database_url=sqlite_url(tmp_path), maintenance_cron=NEVER
        )
    )
    reports = sessions(repo, 12)
    timed_before = _timed("tests")
    with background(config) as (bg, store):
        for raw in reports:
            _, new = submit(store, raw, "test", queue=bg.queue)
            assert new
        _, again = submit(store, reports[0], "test", queue=bg.queue)  # the same bytes again
        assert not again
        wait_for("all verified", lambda: not store.session_ids("pending"))
        idle(bg)
        for i in range(12):
            assert reasons(store, f"s-{i:04d}") == [("delivered", "ingest")]
    # Each run's check durations went into this process's /metrics histogram.
    assert _timed("tests") == timed_before + 12


def _timed(check: str) -> float:
    from verifier.service.metrics import CHECK_SECONDS

    for metric in CHECK_SECONDS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels == {"check": check}:
                return sample.value
    return 0.0


def test_sessions_left_pending_are_verified_when_serve_starts(
    repo: GitRepo, tmp_path: Path
) -> None:
    config = load(write_config(tmp_path, repo, QUICK, database_url=sqlite_url(tmp_path)))
    with Store.open(config.database_url) as store:
        for raw in sessions(repo, 3):
            submit(store, raw, "test")  # `verifier ingest`: stored, nobody told
        assert len(store.session_ids("pending")) == 3
    with background(config) as (bg, store):
        wait_for("all verified", lambda: not store.session_ids("pending"))
        idle(bg)
        assert {len(store.runs(f"s-{i:04d}")) for i in range(3)} == {1}


def test_a_stop_kills_the_run_under_way_records_nothing_and_the_next_start_verifies_it(
    repo: GitRepo, tmp_path: Path
) -> None:
    blocker = tmp_path / "block"
    config = load(
        write_config(
            tmp_path,
            repo,
            block_once(blocker),
            database_url=sqlite_url(tmp_path),
            maintenance_cron=NEVER,
        )
    )
    with Store.open(config.database_url) as store:
        bg = Background.start(config, store, worker=True)
        try:
            submit(store, sessions(repo, 1)[0], "test", queue=bg.queue)
            test_pid, worker_pid = wait_for("the test run", lambda: blocked_pids(blocker))
            assert worker_pid == os.getpid()
        finally:
            bg.stop()
        with pytest.raises(ProcessLookupError):
            os.kill(test_pid, 0)  # the run was killed by the stop
        assert store.runs("s-0000") == []
        assert store.session_ids("pending") == ["s-0000"]
    with background(config) as (bg, store):
        wait_for("verified", lambda: not store.session_ids("pending"))
        idle(bg)
        assert reasons(store, "s-0000") == [("delivered", "ingest")]


def test_an_unreachable_repository_is_retried_until_it_is_back(
    repo: GitRepo, tmp_path: Path
) -> None:
    moved = tmp_path / "mounted-later"
    config = load(
        write_config(
            tmp_path,
            repo,
            QUICK,
            database_url=sqlite_url(tmp_path),
            repo_path=moved,
            maintenance_cron=NEVER,
            retry_base_s=0.01,
            retry_cap_s=0.02,
        )
    )
    reports = sessions(repo, 1)
    with background(config) as (bg, store):
        submit(store, reports[0], "test", queue=bg.queue)
        wait_for("verified", lambda: store.session_ids("inconclusive"))
        idle(bg)
        (run,) = store.runs("s-0000")
        codes = {f.code for f in run.findings}
        assert "change.repo_unavailable" in codes, codes

        repo.path.rename(moved)  # the repository is back
        wait_for("due", lambda: bg.maintain()["retry"] == 1)
        wait_for("verified again", lambda: store.session_ids("delivered"))
        idle(bg)
        assert reasons(store, "s-0000") == [("inconclusive", "ingest"), ("delivered", "retry")]


def test_retries_stop_at_the_configured_number_of_inconclusive_runs(
    repo: GitRepo, tmp_path: Path
) -> None:
    config = load(
        write_config(
            tmp_path,
            repo,
            QUICK,
            database_url=sqlite_url(tmp_path),
            repo_path=tmp_path / "never-there",
            maintenance_cron=NEVER,
            retry_base_s=0.01,
            retry_cap_s=0.02,
            retry_max_runs=3,
        )
    )
    with background(config) as (bg, store):
        submit(store, sessions(repo, 1)[0], "test", queue=bg.queue)
        wait_for("verified", lambda: store.session_ids("inconclusive"))
        idle(bg)
        queued = []
        for _ in range(5):
            wait_for("past the backoff", lambda: backoff_passed(store, config))
            queued.append(bg.maintain()["retry"])
            idle(bg)
        assert queued == [1, 1, 0, 0, 0]
        assert [r for _, r in reasons(store, "s-0000")] == ["ingest", "retry", "retry"]


def test_an_uncounted_test_run_is_never_retried(repo: GitRepo, tmp_path: Path) -> None:
    config = load(
        write_config(
            tmp_path,
            repo,
            QUICK,
            database_url=sqlite_url(tmp_path),
            results="auto",  # `python -c pass` is not a runner we count: tests.uncounted
            maintenance_cron=NEVER,
            retry_base_s=0.01,
            retry_cap_s=0.02,
        )
    )
    with background(config) as (bg, store):
        submit(store, sessions(repo, 1)[0], "test", queue=bg.queue)
        wait_for("verified", lambda: store.session_ids("inconclusive"))
        idle(bg)
        (run,) = store.runs("s-0000")
        assert [f.code for f in run.findings] == ["tests.uncounted"]
        assert [bg.maintain()["retry"] for _ in range(3)] == [0, 0, 0]
        idle(bg)
        assert len(store.runs("s-0000")) == 1
