"""A real HTTP receiver on the loopback, in a thread: what webhooks are tested against."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Answers each POST with the next of `statuses` (the last one once they run out)."""

    url: str
    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[Received] = field(default_factory=list)


@contextmanager
def receiver(statuses: list[int] | None = None) -> Iterator[Receiver]:
    state = Receiver(url="", statuses=list(statuses or [200]))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with lock:
                state.requests.append(Received(self.path, dict(self.headers.items()), body))
                status = state.statuses.pop(0) if len(state.statuses) > 1 else state.statuses[0]
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/verifier"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
