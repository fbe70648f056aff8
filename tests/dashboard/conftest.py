"""Fixtures of the dashboard's tests: a seeded store (SQLite, or PostgreSQL where marked),
tokens of each scope, the API app with the dashboard, a TestClient."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api.apikit import make_config, make_tokens
from dashboard.seed import seed
from fastapi.testclient import TestClient
from store.pg import NO_POSTGRES, POSTGRES_URL, postgres_database

from verifier.api import create_app
from verifier.store import upgrade


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'dashboard.sqlite3'}"
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with postgres_database(POSTGRES_URL) as url:
        upgrade(url)
        yield url


@pytest.fixture
def tokens(db_url: str) -> dict[str, str]:
    tokens = make_tokens(db_url)
    seed(db_url)
    return tokens


@pytest.fixture
def client(db_url: str, tokens: dict[str, str]) -> Iterator[TestClient]:
    """The API and the dashboard on the seeded store; not logged in."""
    with TestClient(create_app(make_config(db_url)), follow_redirects=False) as test_client:
        yield test_client
