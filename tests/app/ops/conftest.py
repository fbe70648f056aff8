"""Fixtures of the operations tests: a store on SQLite or PostgreSQL, tokens, the API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.support.api import RecordingQueue, make_config, make_tokens
from verifier.service.api import create_app


@pytest.fixture
def tokens(db_url: str) -> dict[str, str]:
    return make_tokens(db_url)


@pytest.fixture
def client(db_url: str, tokens: dict[str, str]) -> Iterator[TestClient]:
    app = create_app(make_config(db_url), RecordingQueue())
    with TestClient(app) as test_client:
        yield test_client
