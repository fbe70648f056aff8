"""The store of sessions and verification runs; see `verifier.store.db`."""

from verifier.store.db import (
    Counts,
    Group,
    Listed,
    NoStore,
    Page,
    RejectedRow,
    RunRow,
    SessionFilter,
    SessionRow,
    Stats,
    Store,
    current_revision,
    head_revision,
    upgrade,
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
