"""A cancel token that a blocking loop can wait on with `select`, beside its own fds.

Setting it from any thread wakes every `select` that includes `fileno()`: the
runner waits on the test process's output, its exit and this token at once,
with no polling sleep.

`cancel_all` sets every token of the process, and every token made after it: a
signal's stop. A signal handler's exception lands wherever the main thread is,
and where that is a finalizer or a weakref callback (the garbage collector runs
them in whichever thread allocates) Python swallows it: the work it meant to stop
must not depend on where it landed.
"""

from __future__ import annotations

import os

__all__ = ["CancelToken", "cancel_all"]

# The tokens open in this process (a token leaves on `close`, before its pipe closes),
# and whether `cancel_all` was called: then new tokens are born set.
_OPEN: set[CancelToken] = set()
_all_cancelled = False


def cancel_all() -> None:
    """Set every cancel token of this process, now and from now on.

    Meant for a signal handler: it takes no lock (a thread holding one would deadlock
    the handler), only a write to each token's pipe; the snapshot of the open tokens is
    one C call under the GIL.
    """
    global _all_cancelled
    _all_cancelled = True
    for token in tuple(_OPEN):
        token.set()


class CancelToken:
    def __init__(self) -> None:
        self._set = False
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        _OPEN.add(self)
        if _all_cancelled:
            self.set()

    def fileno(self) -> int:
        """Readable once the token is set."""
        return self._read

    def set(self) -> None:
        if not self._set:
            self._set = True
            os.write(self._write, b"x")

    def is_set(self) -> bool:
        return self._set

    def close(self) -> None:
        _OPEN.discard(self)
        for fd in (self._read, self._write):
            os.close(fd)

    def __enter__(self) -> CancelToken:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
