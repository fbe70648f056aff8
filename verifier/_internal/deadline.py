"""The deadline of the check that runs in this thread: one value every git call and loop obeys.

`verifier.verify` runs each check under `deadline_of` its budget; `Git`
objects made while it holds (`verifier._internal.git`) cut every command's
timeout to what is left, and loops that poll (`verifier.checks.replay`) read
`check_deadline`. A context variable, so a check's own threads share it only
through the objects made in the check's thread, and nothing is global.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("check_deadline", default=None)


def check_deadline() -> float | None:
    """The `time.monotonic` the current check must be done by; None outside a check."""
    return _DEADLINE.get()


@contextmanager
def deadline_of(seconds: float) -> Iterator[float]:
    """Run the block as a check with `seconds` to finish; yields the deadline."""
    deadline = time.monotonic() + seconds
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)
