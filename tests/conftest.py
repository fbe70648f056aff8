"""Shared fixtures: real repositories, a real SQLite file, the real PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    drop_templates,
    migrated_postgres_database,
    migrated_sqlite_file,
)
from tests.support.sessions import calc_repo


@pytest.fixture(scope="session", autouse=True)
def _templates() -> Iterator[None]:
    """The migrated templates this worker made are dropped when its session ends."""
    yield
    drop_templates()


@pytest.fixture(scope="session", autouse=True)
def _children_environment() -> Iterator[None]:
    """What every process a test starts inherits, set in each worker (never in xdist's
    controller, whose workers load the plugins the suite itself uses):

    - a pytest started outside the sandbox (a scripted session's `python -m pytest` on the
      calc repository) loads no plugin of this venv it is not told to: importing
      hypothesis, schemathesis and the others cost each such run about a second of CPU;
      the sandbox sets the same variable for the runs it makes;
    - no process writes bytecode: `make test` lets the workers write it (so that each
      `python -m verifier` a test starts reads verifier's compiled modules rather than
      compiling them again), but a child never leaves a `__pycache__` in a repository."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        patch.setenv("PYTHONDONTWRITEBYTECODE", "1")
        yield


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """The calc repository at its base commit."""
    return calc_repo(tmp_path / "calc")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated store of each kind: a SQLite file, and a PostgreSQL database of its own
    on the real server (skipped when VERIFIER_TEST_POSTGRES_URL is unset; `make test`
    and CI set it, so there they run or fail). A module that defines `db_url` keeps its own."""
    if request.param == "sqlite":
        template = request.getfixturevalue("tmp_path_factory").getbasetemp() / "template.sqlite3"
        yield migrated_sqlite_file(tmp_path / "store.sqlite3", template)
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url:
        yield url


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test gets its own embedded store; nothing touches the user's."""
    monkeypatch.setenv("VERIFIER_DATABASE_URL", f"sqlite:///{tmp_path / 'store.sqlite3'}")
    monkeypatch.delenv("VERIFIER_CONFIG", raising=False)
    yield
