"""Pausing the garbage collector while a report's millions of objects are built."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["gc_paused"]


class _GcPause:
    """How many threads are inside `gc_paused`, and whether the collector ran before the first."""

    lock = threading.Lock()
    depth = 0
    resume = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, then restore it as it was.

    Why: loading a report builds millions of containers (the JSON tree, the
    contract's models, the SDK's `Content` objects), and all of them survive.
    CPython's collector runs every 700 allocations and, as the objects age,
    rescans everything built so far: a 17 MB report took 1.6 s instead of
    0.7 s, and the time per MB grew with the size. Nothing built here is
    garbage, so pausing frees nothing later.

    On resuming, the objects built meanwhile are moved to the oldest generation
    (`gc.freeze()` then `gc.unfreeze()`, which put every tracked object there
    without scanning it): left young, they would all be scanned by the very
    next collection, 0.15 s for that report. They are scanned with the rest
    at the next full collection, if they are still alive then. This is skipped
    when the process keeps objects frozen itself (say before forking workers),
    since unfreezing would undo that.

    Nested and concurrent blocks are counted: the collector resumes when the
    last one ends, and only if it was running when the first began. Usable as
    a decorator too.
    """
    with _GcPause.lock:
        if _GcPause.depth == 0:
            _GcPause.resume = gc.isenabled()
            gc.disable()
        _GcPause.depth += 1
    try:
        yield
    finally:
        with _GcPause.lock:
            _GcPause.depth -= 1
            if _GcPause.depth == 0 and _GcPause.resume:
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()
