"""Fixtures of the dashboard's tests: a seeded store (SQLite, or PostgreSQL where marked),
tokens of each scope, the API app with the dashboard, a TestClient."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.support.api import make_config, make_tokens
from tests.support.dashboard_seed import seed
from verifier.service.api import create_app


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
