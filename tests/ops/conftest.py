"""Fixtures of the operations tests: a store on SQLite or PostgreSQL, tokens, the API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api.apikit import RecordingQueue, make_config, make_tokens
from fastapi.testclient import TestClient
from store.pg import NO_POSTGRES, POSTGRES_URL, postgres_database

from verifier.api import create_app
from verifier.store import upgrade


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ops.sqlite3'}"
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with postgres_database(POSTGRES_URL) as url:
        upgrade(url)  # a PostgreSQL store is migrated by `verifier db upgrade`, not by open
        yield url


@pytest.fixture
def tokens(db_url: str) -> dict[str, str]:
    return make_tokens(db_url)


@pytest.fixture
def client(db_url: str, tokens: dict[str, str]) -> Iterator[TestClient]:
    app = create_app(make_config(db_url), RecordingQueue())
    with TestClient(app) as test_client:
        yield test_client
