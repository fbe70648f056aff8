"""Code that only works with a file outside the repository does not pass.

The sandbox is an allow-list: another run's copy, the user's `~/.npmrc` and
`~/.cargo`, and the verifier's own SQLite database (named in `file:` URI form,
and lying inside a folder the run is shown) are out of reach. Each attack is a
real session whose subtract() needs that file to work, verified with the
default configuration: `not_delivered` (`tests.failed`). The control with
``network_isolation = "off"`` shows the file is really there to be read.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fix_turns, fixed_session, to_bytes
from verifier._internal.sandbox.runner import sandboxes_available
from verifier._internal.snapshot import temp_parent
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import DeliveryStatus, Verification
from verifier.verify import verify

pytestmark = pytest.mark.skipif(not sandboxes_available(), reason="no sandbox works here")


def needs(path: Path) -> str:
    """subtract() fixed, but only when `path` can be opened."""
    return f"    open({str(path)!r}, 'rb').close()\n    return a - b\n"


def verdict(repo: GitRepo, path: Path, **config: Any) -> Verification:
    report = fixed_session(repo, turns=fix_turns(needs(path))).report()
    calc = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    return verify(parse_report(to_bytes(report)), Config(repositories={"calc": calc}, **config))


def assert_out_of_reach(repo: GitRepo, path: Path, **config: Any) -> None:
    v = verdict(repo, path, **config)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()
    assert [f.code for f in v.checks["tests"].findings] == ["tests.failed"]
    assert v.checks["tests"].details["sandbox"] in ("bwrap", "unshare")
    excerpt = v.checks["tests"].details["output_excerpt"]
    # Not bound (absent), or covered where it lies inside something bound (unreadable).
    assert "FileNotFoundError" in excerpt or "PermissionError" in excerpt, excerpt


def assert_reachable_without_a_sandbox(repo: GitRepo, path: Path, **config: Any) -> None:
    repo.git("reset", "-q", "--hard", "HEAD~1")  # the session again, from its base
    v = verdict(repo, path, network_isolation="off", **config)
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()


@pytest.fixture
def other_run() -> Iterator[Path]:
    """A file in another run's copy, where that run would hold it (memory, else /tmp)."""
    folder = Path(tempfile.mkdtemp(prefix="verifier-tests-", dir=temp_parent(1 << 20)))
    (folder / "work").mkdir()
    (folder / "work" / "answers.txt").write_text("42")
    yield folder / "work" / "answers.txt"
    shutil.rmtree(folder)


def test_another_runs_copy_is_out_of_reach(repo: GitRepo, other_run: Path) -> None:
    assert_out_of_reach(repo, other_run)
    assert_reachable_without_a_sandbox(repo, other_run)


@pytest.mark.parametrize("secret", [".npmrc", ".cargo/credentials.toml"])
def test_the_users_package_credentials_are_out_of_reach(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    home = tmp_path / "home"
    (home / secret).parent.mkdir(parents=True, exist_ok=True)
    (home / secret).write_text("//registry.npmjs.org/:_authToken=secret\n")
    monkeypatch.setenv("HOME", str(home))
    assert_out_of_reach(repo, home / secret)
    assert_reachable_without_a_sandbox(repo, home / secret)


def test_a_sqlite_database_named_as_a_file_uri_is_hidden(repo: GitRepo, tmp_path: Path) -> None:
    # The database lies in a folder every run is shown read-only: only hiding keeps it out.
    shown = tmp_path / "shown"
    shown.mkdir()
    database = shown / "verifier.sqlite3"
    database.write_bytes(b"SQLite format 3\0")
    (shown / "fixture.txt").write_text("shown")
    url = f"sqlite:///file:{database}?mode=rw&uri=true"
    config = {"database_url": url, "sandbox_read_only": [str(shown)]}

    assert_out_of_reach(repo, database, **config)
    repo.git("reset", "-q", "--hard", "HEAD~1")
    # The folder itself is shown: only the database was covered.
    assert verdict(repo, shown / "fixture.txt", **config).delivery_status is (
        DeliveryStatus.DELIVERED
    )
