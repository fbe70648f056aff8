"""Helpers for the API's tests: a configuration, tokens, a real server in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import uvicorn
from fastapi import FastAPI
from sqlalchemy import NullPool, create_engine, text

from verifier.config import Config
from verifier.findings import CheckResult, CheckStatus, Finding, Verification, decide
from verifier.store import Store
from verifier.store.queue import LocalQueue, PostgresQueue, Queue
from verifier.store.tokens import SCOPES, create_token

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)


def make_config(database_url: str, **verifier_keys: Any) -> Config:
    return Config.from_mapping({"verifier": {"database_url": database_url, **verifier_keys}})


def make_tokens(database_url: str) -> dict[str, str]:
    """One token of each scope, by scope; the secrets, as `token create` prints them."""
    with Store.open(database_url) as store:
        return {
            scope: create_token(store, name=f"{scope}-token", scope=scope, actor="test")[1]
            for scope in SCOPES
        }


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


class RecordingQueue:
    """A `verifier.store.queue.Queue` that records what it is asked to do.

    The API's side of the queue is `enqueue(session_id, reason)` (through the
    pipeline) and `reachable()`; these tests check what the API asks, not how a
    queue runs jobs (tests/service does). Like `LocalQueue`, it cannot join the
    transaction that stores a session (`on_insert` is None), so `enqueue` follows.
    """

    def __init__(self) -> None:
        self.jobs: list[tuple[str, str]] = []
        self.down: str | None = None

    def on_insert(self, session_id: str, reason: str) -> None:
        return None

    def enqueue(self, session_id: str, reason: str, *, after_run: int | None = None) -> bool:
        self.jobs.append((session_id, reason))
        return True

    def busy(self, session_ids: Collection[str]) -> set[str]:
        return {sid for sid, _ in self.jobs} & set(session_ids)

    def reachable(self) -> str | None:
        return self.down

    def close(self) -> None:
        pass


def verification(
    session_id: str,
    *,
    failed: bool = False,
    error: bool = False,
    started_at: datetime = T0,
) -> Verification:
    """A finished verification of three checks: delivered, not delivered (a missing
    change) or, with `error`, inconclusive (tests could not run)."""
    changes = (
        CheckResult(
            "changes",
            CheckStatus.FAIL,
            (Finding("change.missing", "calc.py is not at head", "calc.py"),),
            duration_s=0.02,
        )
        if failed
        else CheckResult("changes", CheckStatus.PASS, duration_s=0.02)
    )
    tests = (
        CheckResult.error("tests", "tests.no_command", "no test command configured")
        if error
        else CheckResult("tests", CheckStatus.PASS, details={"passed": 2}, duration_s=1.5)
    )
    checks = {"changes": changes, "tests": tests, "audit": CheckResult("audit", CheckStatus.PASS)}
    return Verification(
        session_id=session_id,
        agent_status="done",
        done=True,
        delivery_status=decide(list(checks.values())),
        checks=checks,
        started_at=started_at,
        finished_at=started_at + timedelta(seconds=2),
        verifier_version="0.1.0",
    )


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Run `app` under uvicorn on a free port in a thread; yields its base URL."""
    # IPPROTO_TCP named, as `verifier serve` (uvicorn's create_server) has it: asyncio sets
    # TCP_NODELAY on accepted sockets only then; without it every keep-alive answer waits
    # for the client's delayed ACK (40 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", backlog=256)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server stopped while starting: see the log above")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


class RealQueue:
    """The queue `verifier serve` would use on this engine, and the jobs it was given.

    PostgreSQL: procrastinate's table (`PostgresQueue`), jobs read back from it.
    SQLite: the in-process pool (`LocalQueue`), whose verification is replaced by
    recording the session: what is queued, not how it is verified, is tested here.
    """

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._lock = threading.Lock()
        self._ran: list[str] = []
        self.queue: Queue
        if database_url.startswith("postgresql"):
            self.queue = PostgresQueue(database_url)
        else:
            self.queue = LocalQueue(self._record, concurrency=2)

    def _record(self, session_id: str, reason: str, after_run: int | None) -> None:
        with self._lock:
            self._ran.append(session_id)

    def jobs(self) -> list[str]:
        """The session of each job given, sorted; waits for the pool on SQLite."""
        if isinstance(self.queue, LocalQueue):
            self.queue.close(wait=True)
            return sorted(self._ran)
        engine = create_engine(self._url, poolclass=NullPool)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT queueing_lock FROM procrastinate_jobs"))
            found = sorted(row[0] for row in rows)
        engine.dispose()
        return found

    def close(self) -> None:
        self.queue.close()
