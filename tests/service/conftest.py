"""Fixtures of the service tests: a migrated PostgreSQL database of its own per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from store.pg import NO_POSTGRES, POSTGRES_URL, postgres_database

from verifier.store import upgrade


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new PostgreSQL database at the head revision, procrastinate's tables included."""
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with postgres_database(POSTGRES_URL) as url:
        upgrade(url)
        yield url
