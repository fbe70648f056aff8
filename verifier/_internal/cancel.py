"""A cancel token that a blocking loop can wait on with `select`, beside its own fds.

Setting it from any thread wakes every `select` that includes `fileno()`: the
runner waits on the test process's output, its exit and this token at once,
with no polling sleep.
"""

from __future__ import annotations

import os
import threading


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)

    def fileno(self) -> int:
        """Readable once the token is set."""
        return self._read

    def set(self) -> None:
        if not self._event.is_set():
            self._event.set()
            os.write(self._write, b"x")

    def is_set(self) -> bool:
        return self._event.is_set()

    def close(self) -> None:
        for fd in (self._read, self._write):
            os.close(fd)

    def __enter__(self) -> CancelToken:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
