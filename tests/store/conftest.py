"""The store's tests run on a real SQLite file and, when VERIFIER_TEST_POSTGRES_URL is set,
on a PostgreSQL database of their own (modules that define `db_url` keep theirs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from store.pg import NO_POSTGRES, POSTGRES_URL, postgres_database

from verifier.store import upgrade


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite3'}"
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with postgres_database(POSTGRES_URL) as url:
        upgrade(url)  # a PostgreSQL store is migrated by `verifier db upgrade`, not by open
        yield url
