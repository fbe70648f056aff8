"""Helpers for the API's tests: a configuration, tokens, a real server in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import uvicorn
from fastapi import FastAPI

from verifier.auth import SCOPES
from verifier.config import Config
from verifier.findings import CheckResult, CheckStatus, Finding, Verification, decide
from verifier.store import Store
from verifier.store.tokens import create_token

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
    """The queue the API is handed, recording what it is asked to do.

    Stands in for `verifier.queue` (built beside this API in issue 7): the
    API's side of that contract is `enqueue(session_id, reason)` and
    `reachable()`, which is what these tests check. Like the in-process queue,
    it cannot join the transaction that stores a session (`on_insert` is None).
    """

    def __init__(self) -> None:
        self.jobs: list[tuple[str, str]] = []
        self.down: str | None = None

    def on_insert(self, session_id: str, reason: str) -> None:
        return None

    def enqueue(self, session_id: str, reason: str) -> bool:
        self.jobs.append((session_id, reason))
        return True

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
