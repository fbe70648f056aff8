"""The store of sessions and verification runs.

`db` holds the `Store` and its queries, `rows` the frozen rows and filters it
hands out and takes, `engine` the engine and migrations underneath, `stats` the
counts kept per day. Tokens and the admin log (`tokens`), overrides, webhooks,
the witness, probes, the test-result cache, maintenance and the job queue each
keep their tables in a module of their own.
"""

from verifier.store.db import Store
from verifier.store.engine import NoStore, current_revision, head_revision, upgrade
from verifier.store.rows import (
    Counts,
    Group,
    Listed,
    Page,
    RejectedRow,
    RunRow,
    SessionFilter,
    SessionRow,
    Stats,
)

__all__ = [
    "Counts",
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
