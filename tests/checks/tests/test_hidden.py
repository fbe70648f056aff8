"""What the sandbox covers while the tests run (`verifier.checks.tests.hidden`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from verifier._internal.sandbox import runner
from verifier.checks.tests.check import check
from verifier.checks.tests.hidden import CREDENTIALS, hidden_paths
from verifier.config import Config
from verifier.findings import CheckStatus

PYTEST = ("{python}", "-m", "pytest", "-q")


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "r")


@pytest.mark.skipif(
    not runner.network_isolation_available(), reason="the unshare sandbox does not work here"
)
def test_sandbox_hides_the_repository_and_our_configuration(repo: GitRepo, tmp_path: Path) -> None:
    secret_config = tmp_path / "verifier.toml"
    secret_config.write_text('[verifier]\ndatabase_url = "postgresql://u:hunter2@db/x"\n')
    probe = (
        "import os\n\n\n"
        "def test_the_original_repository_and_config_are_out_of_reach():\n"
        f"    repo, config = {str(repo.path)!r}, {str(secret_config)!r}\n"
        "    assert not os.path.exists(repo)\n"
        "    assert not os.path.exists(config)\n"
        "    try:\n"
        "        open(os.path.join(repo, 'pwned'), 'w')\n"
        "    except OSError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError('wrote into the checked repository')\n\n\n"
        "def test_no_process_of_the_verifier_is_visible():\n"
        "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "    cmdlines = [open(f'/proc/{p}/cmdline', 'rb').read() for p in pids]\n"
        "    assert not any(b'verifier' in c and b'pytest' not in c for c in cmdlines)\n"
    )
    commit = repo.commit({"test_probe.py": probe})
    before = repo.snapshot()
    config = replace(Config(), source=secret_config)

    result = check(repo.path, commit, PYTEST, 60, config)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert str(repo.path) in result.details["hidden"]
    assert str(secret_config) in result.details["hidden"]
    assert repo.snapshot() == before


@pytest.mark.parametrize(
    "url", ["sqlite+pysqlite:///{db}", "sqlite:///{db}?timeout=5"], ids=["driver", "query"]
)
def test_the_sqlite_database_is_hidden_whatever_the_url_form(
    repo: GitRepo, tmp_path: Path, url: str
) -> None:
    db = tmp_path / "v.sqlite3"
    config = replace(Config(), database_url=url.format(db=db))
    assert db in hidden_paths(repo.path, config, keep=[])


def test_the_users_credentials_are_hidden_unless_the_run_needs_a_path_inside(
    tmp_path: Path,
) -> None:
    hidden = hidden_paths(tmp_path / "r", Config(), keep=[])
    assert all(Path.home() / name in hidden for name in CREDENTIALS)
    assert (tmp_path / "r").resolve() in hidden

    # A venv kept inside the checked repository: the repository stays visible (read-only).
    kept = hidden_paths(tmp_path / "r", Config(), keep=[tmp_path / "r" / ".venv"])
    assert (tmp_path / "r").resolve() not in kept
    assert Path.home() / ".ssh" in kept
