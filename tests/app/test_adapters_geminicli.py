"""`adapters shadow` and `inventory` over stored gemini-cli sessions (imported from real
gemini-cli transcripts), on SQLite and PostgreSQL: the two 0.61 families read every call
alike but `write_todos`, which only the legacy family has."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import geminicli
from tests.support.gitrepo import GitRepo
from tests.support.sessions import calc_repo, config_toml
from verifier import resources
from verifier.app import adapters
from verifier.app import geminicli as app
from verifier.config import Config
from verifier.store import Store

LEGACY, GEMINI_3 = "gemini-cli-0.61-legacy", "gemini-cli-0.61-gemini-3"
FIX = {
    "file_path": "calc.py",
    "old_string": "def subtract(a, b):\n    return a + b",
    "new_string": "def subtract(a, b):\n    return a - b",
    "instruction": "subtract must subtract",
}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, Path]:
    """One real gemini-cli session (a legacy model): its repository and transcript, run
    once for the module's tests (each stores it in a store of its own; nothing here
    changes the repository or the transcript)."""
    tmp = tmp_path_factory.mktemp("session")
    repo = calc_repo(tmp / "calc")
    turns = [
        geminicli.turn({"write_todos": {"todos": [{"description": "fix", "status": "completed"}]}}),
        geminicli.turn({"replace": FIX}),
        geminicli.turn({"mcp_tracker_close": {"id": 7}}),
        geminicli.turn("Fixed."),
    ]
    ran = geminicli.session(repo.path, tmp / "home", turns, model=geminicli.LEGACY_MODEL)
    assert ran.transcript is not None, ran.stderr[-2000:]
    return repo, ran.transcript


@pytest.fixture
def stored(session: tuple[GitRepo, Path], tmp_path: Path, db_url: str) -> Iterator[Store]:
    """The session imported and stored."""
    repo, transcript = session
    config = Config.load(config_toml(tmp_path, repo), environ={})
    report = app.import_transcript(config, transcript, repo.path).report
    with Store.open(db_url) as store:
        store.ingest(report)
        yield store


def test_shadowing_the_families_finds_write_todos_alone(stored: Store) -> None:
    shadow = adapters.shadow_store(stored, resources.profiles_dir(), LEGACY, GEMINI_3)
    assert shadow.scan.sessions == 1
    assert [(d.name, [x.kind for x in d.differences]) for d in shadow.diffs] == [
        ("write_todos", ["unrecognised"])
    ]
    back = adapters.shadow_store(stored, resources.profiles_dir(), LEGACY, LEGACY)
    assert back.diffs == ()


def test_the_inventory_says_which_family_covers_each_call(stored: Store) -> None:
    inventory = adapters.inventory_store(stored, resources.profiles_dir())
    shapes = {s.name: s for s in inventory.shapes}
    assert set(shapes) == {"write_todos", "replace", "mcp_tracker_close"}
    assert LEGACY in shapes["write_todos"].known_by
    assert GEMINI_3 not in shapes["write_todos"].known_by
    for name in ("replace", "mcp_tracker_close"):  # mcp_*: the pattern covers it
        assert {LEGACY, GEMINI_3} <= set(shapes[name].covered_by), name
    assert "default" not in shapes["replace"].known_by
