"""Fixtures of the trust tests: a store on SQLite or PostgreSQL, keys, configurations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    migrated_postgres_database,
)
from verifier.store import upgrade


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'trust.sqlite3'}"
        upgrade(url)
        yield url
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url:
        yield url
