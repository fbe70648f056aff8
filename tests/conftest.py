"""Shared fixtures: real repositories, a real SQLite file, the real PostgreSQL server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitrepo import GitRepo
from sessions import calc_repo


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """The calc repository at its base commit."""
    return calc_repo(tmp_path / "calc")


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test gets its own embedded store; nothing touches the user's."""
    monkeypatch.setenv("VERIFIER_DATABASE_URL", f"sqlite:///{tmp_path / 'store.sqlite3'}")
    monkeypatch.delenv("VERIFIER_CONFIG", raising=False)
    yield


def postgres_url() -> str | None:
    return os.environ.get("VERIFIER_TEST_POSTGRES_URL") or None
