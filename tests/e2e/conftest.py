"""The end-to-end tests' fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import geminicli


@pytest.fixture
def gemini() -> Path:
    """The pinned gemini-cli's binary: skipped without it, failed in CI (`geminicli.require`)."""
    return geminicli.require()
