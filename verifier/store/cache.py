"""The store's cache of conclusive test results: the tests check's `TestResultCache`.

One row per key (table ``test_result_cache``): the key is a SHA-256 over what
decided the run (`verifier.checks.tests.check.cache_key`), the row keeps the session
first tested under it and the check's result as JSON. The first result put
under a key stays: two workers that tested the same tree at once computed the
same thing, and the later one's insert is dropped. Only the tests check decides
what is kept (a pass or a failure, never an error); this module only stores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from verifier.store.db import Store
from verifier.store.models import TestResultCacheModel

__all__ = ["TestResults"]


class TestResults:
    """`TestResultCache` over one open store."""

    __test__ = False  # not a pytest class, whatever its name

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, key: str) -> tuple[str, Mapping[str, Any]] | None:
        """The session first tested under `key` and its result, or None."""
        with self._store.transaction() as session:
            row = session.execute(
                select(TestResultCacheModel.session_id, TestResultCacheModel.result).where(
                    TestResultCacheModel.key == key
                )
            ).first()
        if row is None:
            return None
        session_id, result = row
        return session_id, result

    def put(self, key: str, session_id: str, result: Mapping[str, Any]) -> None:
        """Keep `result` under `key` unless a result is kept there already."""
        if self._store._read_only:
            return
        try:
            # Read then write: on SQLite the write lock is taken first (BEGIN IMMEDIATE).
            with self._store.transaction(write=True) as session:
                if session.get(TestResultCacheModel, key) is None:
                    session.add(
                        TestResultCacheModel(key=key, session_id=session_id, result=dict(result))
                    )
        except IntegrityError:
            pass  # another worker kept the same key meanwhile: the first stays
