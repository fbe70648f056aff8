"""Posting a recorded report to a real verifier service: retried, idempotent, refused when final."""

from __future__ import annotations

import http.server
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from audit.errors import UploadError
from audit.recorder import dumps
from audit.upload import post_report, write_report
from tests.support.api import RecordingQueue, make_config, make_tokens
from tests.support.gitrepo import GitRepo
from tests.support.paths import TURNS
from tests.support.scripted import ScriptedClient, load_turns, recorder, run_session
from verifier.service.api import create_app
from verifier.store import Store

FIX_CALC = TURNS / "fix_calc.json"


@pytest.fixture
def raw(repo: GitRepo, tmp_path: Path) -> bytes:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    return dumps(rec.finish(run_session(rec, ScriptedClient(load_turns(FIX_CALC)))))


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.sqlite3'}"


@contextmanager
def serving(db: str, sock: socket.socket) -> Iterator[None]:
    """The API under uvicorn on `sock` (bound, not yet listening), in a thread."""
    server = uvicorn.Server(
        uvicorn.Config(create_app(make_config(db), RecordingQueue()), log_level="warning")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server stopped while starting"
        time.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(30)


def bound_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class _Later:
    """A server to start on demand, stopped at the end."""

    def __init__(self, db: str, sock: socket.socket) -> None:
        self._db, self._sock = db, sock
        self._cm: Any = None

    def start(self) -> None:
        if self._cm is None:
            self._cm = serving(self._db, self._sock)
            self._cm.__enter__()

    def __enter__(self) -> _Later:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)


def test_a_service_down_at_the_first_attempt_gets_the_report_on_a_retry_and_stores_its_bytes(
    raw: bytes, db: str
) -> None:
    tokens = make_tokens(db)
    sock = bound_socket()  # bound but not listening: the first attempt is refused
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    waits: list[float] = []
    with _Later(db, sock) as later:

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            later.start()  # the service comes up while the recorder backs off

        posted = post_report(raw, base, tokens["ingest"], sleep=sleep, backoff_s=0.25)
        assert (posted.session_id, posted.created, posted.status, posted.attempts) == (
            "s-1",
            True,
            202,
            2,
        )
        assert waits == [0.25]
        again = post_report(raw, base, tokens["ingest"], sleep=sleep)
        assert (again.created, again.status, again.attempts) == (False, 200, 1)
    with Store.open(db) as store:
        assert store.report_bytes("s-1") == raw  # the bytes as recorded
        assert [s.session.session_id for s in store.sessions()] == [
            "s-1"
        ]  # twice posted, one session
    sock.close()


@contextmanager
def flaky_proxy(target: str, failures: int) -> Iterator[tuple[str, list[int]]]:
    """Answers 503 to the first `failures` requests, then forwards them to `target`."""
    seen: list[int] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if len(seen) < failures:
                seen.append(503)
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            forward = urllib.request.Request(
                target + self.path,
                data=body,
                method="POST",
                headers={
                    "Authorization": self.headers["Authorization"],
                    "Content-Type": "application/json",
                },
            )
            with urllib.request.urlopen(forward) as answer:
                data = answer.read()
                seen.append(answer.status)
                self.send_response(answer.status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}", seen
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_a_503_is_retried_with_backoff_until_the_service_takes_the_report(
    raw: bytes, db: str
) -> None:
    tokens = make_tokens(db)
    sock = bound_socket()
    with (
        serving(db, sock),
        flaky_proxy(f"http://127.0.0.1:{sock.getsockname()[1]}", 2) as (
            base,
            seen,
        ),
    ):
        waits: list[float] = []
        posted = post_report(raw, base, tokens["ingest"], sleep=waits.append, backoff_s=0.5)
        assert (posted.created, posted.attempts) == (True, 3)
        assert seen == [503, 503, 202]
        assert waits == [0.5, 1.0]
    sock.close()


def test_every_attempt_refused_gives_up_naming_the_last_problem(raw: bytes, db: str) -> None:
    tokens = make_tokens(db)
    sock = bound_socket()
    with (
        serving(db, sock),
        flaky_proxy(f"http://127.0.0.1:{sock.getsockname()[1]}", 99) as (
            base,
            seen,
        ),
    ):
        waits: list[float] = []
        with pytest.raises(UploadError) as info:
            post_report(raw, base, tokens["ingest"], sleep=waits.append, attempts=3)
        assert info.value.status == 503 and "gave up after 3 attempt(s): HTTP 503" in str(
            info.value
        )
        assert seen == [503, 503, 503] and len(waits) == 2
    sock.close()


def test_other_bytes_under_a_stored_id_and_a_bad_token_are_final_not_retried(
    raw: bytes, db: str
) -> None:
    tokens = make_tokens(db)
    sock = bound_socket()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with serving(db, sock):
        post_report(raw, base, tokens["ingest"])
        waits: list[float] = []
        other = raw.replace(b'"final_text":"Fixed subtract()."', b'"final_text":"Rewritten."')
        assert other != raw
        with pytest.raises(UploadError) as info:
            post_report(other, base, tokens["ingest"], sleep=waits.append)
        assert info.value.status == 409 and "other bytes" in str(info.value)
        with pytest.raises(UploadError) as info:
            post_report(raw, base, tokens["read"], sleep=waits.append)
        assert info.value.status == 403
        assert waits == []
    sock.close()


def test_a_report_written_to_a_file_is_the_same_bytes(raw: bytes, tmp_path: Path) -> None:
    out = tmp_path / "s-1.json"
    write_report(raw, out)
    assert out.read_bytes() == raw
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
