"""The store of sessions and verification runs.

`db` holds the `Store` and its queries, `rows` the frozen rows and filters it
hands out and takes, `engine` the engine and migrations underneath, `stats` the
counts kept per day. Tokens and the admin log (`tokens`), overrides, webhooks,
the witness, probes, the test-result cache, maintenance and the job queue each
keep their tables in a module of their own.

The names below that need the engine (`Store`, `NoStore`, the revision
functions) load on first use, so that importing the rows or the token format
costs no SQLAlchemy (half a second): the formats and the command line read them
before they know whether they need a database.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from verifier.store.rows import (
    Counts,
    FailureReason,
    Group,
    Listed,
    Page,
    RejectedRow,
    RunRow,
    SessionFilter,
    SessionRow,
    Stats,
)

if TYPE_CHECKING:
    from verifier.store.db import Store
    from verifier.store.engine import NoStore, current_revision, head_revision, upgrade

__all__ = [
    "Counts",
    "FailureReason",
    "Group",
    "Listed",
    "NoStore",
    "Page",
    "RejectedRow",
    "RunRow",
    "SessionFilter",
    "SessionRow",
    "Stats",
    "Store",
    "current_revision",
    "head_revision",
    "upgrade",
]

# Where each name that needs SQLAlchemy lives.
_ENGINE_NAMES = {
    "Store": "verifier.store.db",
    "NoStore": "verifier.store.engine",
    "current_revision": "verifier.store.engine",
    "head_revision": "verifier.store.engine",
    "upgrade": "verifier.store.engine",
}


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute

    def __getattr__(name: str) -> object:
        """`Store`, `NoStore` and the revision functions, imported when first asked for."""
        home = _ENGINE_NAMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value
