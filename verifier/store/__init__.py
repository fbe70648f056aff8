"""The store of sessions and verification runs; see `verifier.store.db`."""

from verifier.store.db import (
    Listed,
    NoStore,
    Rates,
    RunRow,
    SessionRow,
    Store,
    current_revision,
    head_revision,
    upgrade,
)

__all__ = [
    "Listed",
    "NoStore",
    "Rates",
    "RunRow",
    "SessionRow",
    "Store",
    "current_revision",
    "head_revision",
    "upgrade",
]
