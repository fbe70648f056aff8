"""Fixtures of the service tests: a migrated PostgreSQL database of its own per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    migrated_postgres_database,
)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new PostgreSQL database at the head revision, procrastinate's tables included."""
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url:
        yield url
