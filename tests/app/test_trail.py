"""`verifier.app.trail`: a trail file checked on its own, or refused when unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import fixed_session
from verifier.app import trail
from verifier.errors import ConfigError


def test_a_recorded_trail_is_intact_and_one_cut_short_is_unfinished(
    repo: GitRepo, tmp_path: Path
) -> None:
    path = tmp_path / "trail.jsonl"
    fixed_session(repo, trail=path)
    checked = trail.check_file(path)
    assert checked.status == "intact" and checked.exit_code == 0 and checked.count > 2
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
    assert trail.check_file(path).status == "unfinished"
    assert trail.check_file(path, session_id="someone-else").status == "broken"


def test_an_unreadable_trail_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read trail"):
        trail.check_file(tmp_path / "absent.jsonl")
