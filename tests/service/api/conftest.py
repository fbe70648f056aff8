"""Fixtures of the API's tests: a store on SQLite or PostgreSQL, tokens, an app, a client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.api import RecordingQueue, make_config, make_tokens
from verifier.service.api import create_app


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'api.sqlite3'}"


@pytest.fixture
def tokens(db_url: str) -> dict[str, str]:
    return make_tokens(db_url)


@pytest.fixture
def queue() -> RecordingQueue:
    return RecordingQueue()


@pytest.fixture
def client(db_url: str, tokens: dict[str, str], queue: RecordingQueue) -> Iterator[TestClient]:
    """The API on `db_url`, with a recording queue, its lifespan run."""
    app = create_app(make_config(db_url, max_report_bytes=64 * 1024), queue)
    with TestClient(app) as test_client:
        yield test_client
