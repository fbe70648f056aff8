"""The tests check, run for real: git repositories holding small pytest suites."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from verifier._internal.sandbox import runner
from verifier.checks.tests.check import check
from verifier.config import Config
from verifier.findings import CheckResult, CheckStatus

PYTEST = ("{python}", "-m", "pytest", "-q")
OFF = Config(network_isolation="off")

PASSING = "def test_one():\n    assert 1 + 1 == 2\n\n\ndef test_two():\n    assert 'a' in 'abc'\n"
FAILING = "def test_broken():\n    assert 1 == 2\n"


def _codes(result: CheckResult) -> list[str]:
    return [f.code for f in result.findings]


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "r")


def test_passing_suite_in_commit_mode_passes_with_counts(repo: GitRepo) -> None:
    commit = repo.commit({"test_calc.py": PASSING, "calc.py": "def add(a, b):\n    return a + b\n"})

    result = check(repo.path, commit, PYTEST, 60, OFF)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.findings == ()
    details = result.details
    assert details["counts"] == {"passed": 2, "failed": 0, "errors": 0, "skipped": 0}
    assert details["mode"] == "commit"
    assert details["exit_code"] == 0
    assert details["tests_counted"] is True
    assert details["argv"][0] == sys.executable
    assert details["snapshot"]["files"] == 2
    assert "2 passed" in details["output_excerpt"]
    assert result.duration_s > 0


def test_worktree_mode_runs_uncommitted_and_untracked_tests_but_not_ignored_ones(
    repo: GitRepo,
) -> None:
    repo.commit({".gitignore": "test_ignored.py\n", "test_a.py": FAILING})
    repo.write(
        {
            "test_a.py": PASSING,  # the fix, not committed
            "test_new.py": "def test_new():\n    pass\n",  # untracked, not ignored
            "test_ignored.py": FAILING,  # ignored: must not be copied or run
        }
    )

    result = check(repo.path, None, PYTEST, 60, OFF)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["mode"] == "worktree"
    assert result.details["counts"]["passed"] == 3
    assert result.details["snapshot"]["files"] == 3


def test_commit_mode_runs_the_commit_not_the_dirty_working_tree(repo: GitRepo) -> None:
    commit = repo.commit({"test_a.py": FAILING})
    repo.write({"test_a.py": PASSING})

    at_commit = check(repo.path, commit, PYTEST, 60, OFF)
    in_worktree = check(repo.path, None, PYTEST, 60, OFF)

    assert at_commit.status is CheckStatus.FAIL
    assert _codes(at_commit) == ["tests.failed"]
    assert in_worktree.status is CheckStatus.PASS


def test_empty_command_is_an_error_naming_the_setting(repo: GitRepo) -> None:
    commit = repo.commit({"test_a.py": PASSING})

    result = check(repo.path, commit, (), 60, OFF)

    assert result.status is CheckStatus.ERROR
    (finding,) = result.findings
    assert finding.code == "tests.no_command"
    assert "repositories.<name>.test_command" in finding.message
    assert "--test-command" in finding.message


def test_missing_test_runner_is_an_error_not_a_failure(repo: GitRepo) -> None:
    commit = repo.commit({"test_a.py": PASSING})

    result = check(repo.path, commit, ["verifier-no-such-runner-xyz", "-q"], 60, Config())

    assert result.status is CheckStatus.ERROR
    (finding,) = result.findings
    assert finding.code == "tests.runner_not_found"
    assert "verifier-no-such-runner-xyz" in finding.message
    assert "PATH searched" in finding.message


def test_runner_that_cannot_start_is_an_error(repo: GitRepo, tmp_path: Path) -> None:
    commit = repo.commit({"test_a.py": PASSING})
    garbage = tmp_path / "not-a-program"
    garbage.write_bytes(b"\x00\x01 no shebang, no ELF header")
    garbage.chmod(0o755)

    result = check(repo.path, commit, [str(garbage)], 60, OFF)

    assert result.status is CheckStatus.ERROR
    assert _codes(result) == ["tests.runner_failed"]


def test_unknown_head_commit_is_a_snapshot_error(repo: GitRepo) -> None:
    repo.commit({"test_a.py": PASSING})

    result = check(repo.path, "ab" * 20, PYTEST, 60, OFF)

    assert result.status is CheckStatus.ERROR
    assert _codes(result) == ["tests.snapshot_failed"]


def test_shell_metacharacters_in_the_command_are_literal(repo: GitRepo, tmp_path: Path) -> None:
    commit = repo.commit({"test_a.py": PASSING})
    command = ["{python}", "-c", "import sys; print(sys.argv[1:])", "a;b", "$(echo x)", "|"]

    result = check(repo.path, commit, [*command, "; touch pwned"], 60, OFF)

    assert result.details["exit_code"] == 0
    assert result.details["output_excerpt"].strip() == repr(
        ["a;b", "$(echo x)", "|", "; touch pwned"]
    )
    assert not list(tmp_path.rglob("pwned"))
    assert not Path("pwned").exists()


def test_secrets_in_the_environment_do_not_reach_the_tests(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "VERIFIER_DATABASE_URL": "postgresql://u:hunter2@db/verifier",
        "DATABASE_URL": "postgresql://u:hunter2@db/app",
        "GEMINI_API_KEY": "gemini-key-hunter2",
        "GOOGLE_APPLICATION_CREDENTIALS": "/secrets/sa.json",
        "AWS_SECRET_ACCESS_KEY": "aws-hunter2",
        "OPENAI_API_KEY": "sk-hunter2",
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    commit = repo.commit({"env.py": "import json, os\nprint(json.dumps(dict(os.environ)))\n"})

    result = check(repo.path, commit, ["{python}", "env.py"], 60, OFF)

    child_env = json.loads(result.details["output_excerpt"])
    assert not set(secrets) & set(child_env)
    assert "hunter2" not in result.details["output_excerpt"]
    ours = {*runner.minimal_env(Path("h"), Path("t")), "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    assert set(child_env) <= ours


@pytest.mark.skipif(not runner.network_isolation_available(), reason="no `unshare -rn` here")
def test_network_isolation_is_used_and_recorded_when_available(repo: GitRepo) -> None:
    connect = (
        "import socket, sys\n"
        "socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2).close()\n"
    )
    commit = repo.commit({"connect.py": connect})
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = str(server.getsockname()[1])
        isolated = check(repo.path, commit, ["{python}", "connect.py", port], 60, Config())
        open_net = check(repo.path, commit, ["{python}", "connect.py", port], 60, OFF)

    assert isolated.details["network_isolated"] is True
    assert isolated.status is CheckStatus.FAIL  # the connection was refused inside
    assert "Error" in isolated.details["output_excerpt"]
    assert open_net.details["network_isolated"] is False
    assert open_net.details["exit_code"] == 0


def test_required_isolation_that_is_unavailable_is_an_error(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = repo.commit({"test_a.py": PASSING})
    only_git = tmp_path / "only-git"
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(only_git))  # git for the copy, no unshare to be found
    runner.network_isolation_available.cache_clear()
    try:
        result = check(repo.path, commit, PYTEST, 60, Config(network_isolation="required"))
    finally:
        monkeypatch.undo()
        runner.network_isolation_available.cache_clear()

    assert result.status is CheckStatus.ERROR
    assert _codes(result) == ["tests.isolation_unavailable"]


@pytest.mark.parametrize("mode", ["commit", "worktree"])
def test_repository_is_unchanged_after_the_check(repo: GitRepo, mode: str) -> None:
    writer = (
        "from pathlib import Path\n\n\n"
        "def test_writes_into_its_cwd():\n"
        "    Path('artifact.txt').write_text('made by the tests')\n"
        "    Path('test_a.py').write_text('overwritten')\n"
    )
    commit = repo.commit({"test_a.py": writer, "pkg/__init__.py": ""})
    repo.write({"pkg/extra.py": "x = 1\n"})
    before = repo.snapshot()

    result = check(repo.path, commit if mode == "commit" else None, PYTEST, 60, OFF)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert repo.snapshot() == before


def test_output_excerpt_is_bounded_by_the_configured_size(repo: GitRepo) -> None:
    commit = repo.commit({"loud.py": "print('x' * 200_000)\n"})
    config = replace(OFF, output_excerpt_bytes=512)

    result = check(repo.path, commit, ["{python}", "loud.py"], 60, config)

    assert result.details["output_bytes"] == 200_001
    assert len(result.details["output_excerpt"]) < 600


def test_progress_is_reported_before_and_after_the_run(repo: GitRepo) -> None:
    commit = repo.commit({"test_a.py": PASSING})
    lines: list[str] = []

    check(repo.path, commit, PYTEST, 60, OFF, progress=lines.append)

    assert len(lines) == 3
    assert lines[0].startswith("copying the head state into /") and "verifier-tests-" in lines[0]
    assert lines[1].startswith("running tests: [") and lines[1].endswith("(timeout 60s)")
    assert lines[2].startswith("tests finished: exit code 0")


@pytest.mark.skipif(
    not runner.network_isolation_available(), reason="the unshare sandbox does not work here"
)
def test_code_under_test_cannot_undo_the_sandbox(repo: GitRepo, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    probe = (
        "import ctypes, os\n\n\n"
        "def test_covers_are_locked_and_the_host_is_read_only():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        f"    repo = {str(repo.path)!r}\n"
        "    assert libc.umount2(repo.encode(), 2) != 0  # MNT_DETACH refused\n"
        "    assert not os.path.exists(repo)\n"
        "    assert libc.mount(None, b'/', None, 32 | 4096 | 16384, None) != 0  # no rw remount\n"
        "    try:\n"
        f"        open({str(outside)!r}, 'w')\n"
        "    except OSError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError('wrote outside the run folder')\n"
        "    assert not os.path.exists('/run')  # no host sockets\n"
        "    open(os.path.join(os.environ['TMPDIR'], 'scratch'), 'w').write('fine')\n"
    )
    commit = repo.commit({"test_probe.py": probe})
    before = repo.snapshot()

    result = check(repo.path, commit, PYTEST, 60, Config())

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert not outside.exists()
    assert repo.snapshot() == before


def test_a_working_tree_that_moved_since_the_changes_check_is_inconclusive(
    repo: GitRepo,
) -> None:
    repo.commit({"test_a.py": PASSING})
    repo.write({"test_a.py": FAILING.replace("1 == 2", "1 == 1")})  # swapped after hashing
    hashed = {"test_a.py": hashlib.sha256(PASSING.encode()).hexdigest()}

    result = check(repo.path, None, PYTEST, 60, OFF, expected_files=hashed)

    assert result.status is CheckStatus.ERROR
    assert _codes(result) == ["tests.head_moved"]
    assert "test_a.py" in result.findings[0].message


def test_a_head_state_over_the_size_limit_is_not_copied(repo: GitRepo) -> None:
    commit = repo.commit({"test_a.py": PASSING, "big.bin": b"\0" * 10_000})

    result = check(repo.path, commit, PYTEST, 60, replace(OFF, max_snapshot_bytes=5_000))

    assert _codes(result) == ["tests.snapshot_failed"]
    assert "max_snapshot_bytes" in result.findings[0].message


def test_tests_can_write_into_their_working_folder_in_the_sandbox(repo: GitRepo) -> None:
    # Reporters (node's junit, jest-junit, Surefire) write their reports under the copy.
    writer = (
        "from pathlib import Path\n\n\n"
        "def test_writes_a_report():\n"
        "    Path('reports').mkdir()\n"
        "    Path('reports/out.xml').write_text('<testsuite/>')\n"
    )
    commit = repo.commit({"test_a.py": writer})

    result = check(repo.path, commit, PYTEST, 60, Config())

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
