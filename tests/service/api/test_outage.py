"""PostgreSQL made unreachable while the API is up: 503 while it is down, nothing
accepted lost, recovery without a restart. The database is reached through a TCP
proxy this test runs and closes: real sockets, a real server, no mocks."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import NullPool, create_engine, text
from sqlalchemy.engine import make_url

from tests.support.api import bearer, make_config, make_tokens, serve
from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    migrated_postgres_database,
)
from tests.support.report_factory import make_report_bytes
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.queue import PostgresQueue


class TcpProxy:
    """Forwards a local port to a server; `close` cuts every connection and refuses new ones."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        if self._listener is not None:
            # shutdown wakes the thread blocked in accept(); close alone would not.
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def database() -> Iterator[str]:
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url:
        yield url


@pytest.mark.postgres
def test_the_api_answers_503_while_postgresql_is_away_and_recovers_by_itself(
    database: str,
) -> None:
    tokens = make_tokens(database)
    ingest, read = bearer(tokens["ingest"]), bearer(tokens["read"])
    direct = make_url(database)
    proxy = TcpProxy(direct.host or "127.0.0.1", direct.port or 5432)
    proxied = direct.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    proxy.open()
    queue = PostgresQueue(proxied)  # jobs go through the proxy too, in the ingest transaction
    accepted: list[str] = []
    try:
        app = create_app(make_config(proxied), queue)
        with serve(app) as base, httpx.Client(base_url=base) as http:
            assert (
                http.post(
                    "/v1/sessions", content=make_report_bytes("s-before"), headers=ingest
                ).status_code
                == 202
            )
            accepted.append("s-before")

            proxy.close()
            down = http.post("/v1/sessions", content=make_report_bytes("s-during"), headers=ingest)
            assert down.status_code == 503
            assert down.json()["error"]["code"] == "unavailable"
            assert down.headers["retry-after"]
            assert http.get("/v1/sessions/s-before", headers=read).status_code == 503
            assert http.get("/v1/stats", headers=read).status_code == 503
            assert http.get("/metrics", headers=read).status_code == 503
            not_ready = http.get("/readyz")
            assert not_ready.status_code == 503
            assert not_ready.json()["checks"]["database"] == "cannot be reached"
            assert not_ready.json()["checks"]["queue"] != "ok"
            assert http.get("/healthz").status_code == 200  # the process itself is alive

            proxy.open()
            again = http.post("/v1/sessions", content=make_report_bytes("s-during"), headers=ingest)
            assert again.status_code == 202  # it was not taken while down: new now
            accepted.append("s-during")
            assert http.get("/v1/sessions/s-before", headers=read).status_code == 200
            assert http.get("/readyz").status_code == 200
    finally:
        proxy.close()
        queue.close()
    with Store.open(database) as store:
        assert {s.session.session_id for s in store.sessions()} == set(accepted)
    engine = create_engine(database, poolclass=NullPool)
    with engine.connect() as connection:
        queued = connection.execute(text("SELECT queueing_lock FROM procrastinate_jobs"))
        assert sorted(row[0] for row in queued) == sorted(accepted)  # each with its job
    engine.dispose()
