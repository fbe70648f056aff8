"""`serve` as a process: the API up beside the verifications, and a SIGTERM that ends it
within 15 s with the test run under way killed and nothing recorded for it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy import NullPool, create_engine, text

from tests.support.gitrepo import GitRepo
from tests.support.service import (
    PYTHON,
    QUICK,
    ROOT,
    block_once,
    blocked_pids,
    environment,
    kill_quietly,
    logs_of,
    sessions,
    wait_for,
    write_config,
)
from verifier.app.pipeline import submit
from verifier.store import Store
from verifier.store.queue import PostgresQueue


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_serve(config: Path, url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = environment(config, url)
    with log.open("ab") as out:
        return subprocess.Popen(
            [PYTHON, "-m", "tests.support.tinyapp", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )


def answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def stop_within_15_s(proc: subprocess.Popen[bytes], test_pid: int, log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=15) == 0, logs_of(log.parent)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_quietly(test_pid)
    with pytest.raises(ProcessLookupError):
        os.kill(test_pid, 0)  # killed by the stop, not by the clean-up above
    assert b"Traceback" not in log.read_bytes(), log.read_text()


def run_ids(url: str) -> list[int]:
    with Store.open(url) as store:
        return [run.id for run in store.runs("s-0000")]


def test_serve_on_sqlite_answers_verifies_and_stops_on_sigterm_recording_nothing(
    repo: GitRepo, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'serve.sqlite3'}"
    blocker = tmp_path / "block"
    config = write_config(tmp_path, repo, block_once(blocker), database_url=url)
    with Store.open(url) as store:
        submit(store, sessions(repo, 1)[0], "test")  # pending: serve picks it up
    port, log = free_port(), tmp_path / "serve.log"
    proc = start_serve(config, url, port, log)
    test_pid = 0
    try:
        test_pid, worker_pid = wait_for("the test run", lambda: blocked_pids(blocker))
        assert worker_pid == proc.pid  # verified inside the serve process
        wait_for("the API answering", lambda: answers(port))
    finally:
        stop_within_15_s(proc, test_pid, log)
    assert run_ids(url) == []
    with Store.open(url) as store:
        assert store.session_ids("pending") == ["s-0000"]


@pytest.mark.postgres
def test_serve_on_postgres_stops_on_sigterm_and_releases_its_job(
    repo: GitRepo, tmp_path: Path, pg_url: str
) -> None:
    blocker = tmp_path / "block"
    config = write_config(tmp_path, repo, block_once(blocker))
    queue = PostgresQueue(pg_url)
    with Store.open(pg_url) as store:
        submit(store, sessions(repo, 1)[0], "test", queue=queue)
    queue.close()
    port, log = free_port(), tmp_path / "serve.log"
    proc = start_serve(config, pg_url, port, log)
    test_pid = 0
    try:
        test_pid, worker_pid = wait_for("the test run", lambda: blocked_pids(blocker))
        assert worker_pid == proc.pid
        wait_for("the API answering", lambda: answers(port))
    finally:
        stop_within_15_s(proc, test_pid, log)
    assert run_ids(pg_url) == []
    engine = create_engine(pg_url, poolclass=NullPool)
    with engine.connect() as connection:
        statuses = Counter(
            row[0]
            for row in connection.execute(
                text("SELECT status::text FROM procrastinate_jobs WHERE task_name = :t"),
                {"t": "verifier.verify_session"},
            )
        )
    engine.dispose()
    assert statuses["todo"] == 1 and statuses["doing"] == 0  # released for another worker


def test_serve_on_a_port_in_use_is_a_clear_error_and_stops_its_pool(
    repo: GitRepo, tmp_path: Path
) -> None:
    from tests.support.tinyapp import app
    from verifier.config import Config
    from verifier.errors import ConfigError
    from verifier.service.serve import serve

    url = f"sqlite:///{tmp_path / 'serve.sqlite3'}"
    config = Config.load(write_config(tmp_path, repo, QUICK, database_url=url), environ={})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot serve on 127.0.0.1:{port}"):
            serve(config, port=port, app_factory=lambda config, queue: app)
    assert [t.name for t in threading.enumerate() if t.name.startswith("verify")] == []


def test_the_api_is_served_with_the_compiled_http_parser_and_event_loop() -> None:
    import uvloop
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from verifier.service.serve import server_config

    config = server_config(object(), "127.0.0.1", 0)
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol  # not h11, which parses in Python
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
