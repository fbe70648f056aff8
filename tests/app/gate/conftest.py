"""Fixtures of the gate's tests: a project (repository and store), a real server over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import make_config, make_tokens, serve
from tests.support.gate import Live, Project, make_project
from verifier.service.api import create_app


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path)


@pytest.fixture
def live(project: Project) -> Iterator[Live]:
    """The API over the project's store under uvicorn, no queue: nothing is verified by it."""
    tokens = make_tokens(project.database_url)
    with serve(create_app(make_config(project.database_url))) as url:
        yield Live(url, tokens)
