"""The tests check, run for real: git repositories holding small pytest suites."""

from __future__ import annotations

import hashlib
import json
import os
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


def test_failing_test_fails_the_check(repo: GitRepo) -> None:
    commit = repo.commit({"test_a.py": PASSING + "\n\n" + FAILING})

    result = check(repo.path, commit, PYTEST, 60, OFF)

    assert result.status is CheckStatus.FAIL
    (finding,) = result.findings
    assert (finding.code, finding.expected, finding.found) == (
        "tests.failed",
        "exit code 0",
        "exit code 1",
    )
    assert result.details["counts"] == {"passed": 2, "failed": 1, "errors": 0, "skipped": 0}


def test_no_tests_collected_fails_with_none_ran(repo: GitRepo) -> None:
    commit = repo.commit({"calc.py": "x = 1\n"})

    result = check(repo.path, commit, PYTEST, 60, OFF)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.none_ran"]
    assert result.details["exit_code"] == 5


def test_all_tests_skipped_fails(repo: GitRepo) -> None:
    skipped = "import pytest\n\n\n@pytest.mark.skip(reason='later')\ndef test_x():\n    pass\n"
    commit = repo.commit({"test_a.py": skipped})

    result = check(repo.path, commit, PYTEST, 60, OFF)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.all_skipped"]
    assert result.details["counts"] == {"passed": 0, "failed": 0, "errors": 0, "skipped": 1}


def test_some_skipped_and_some_passed_passes(repo: GitRepo) -> None:
    suite = PASSING + "\n\nimport pytest\n\n\n@pytest.mark.skip\ndef test_later():\n    pass\n"
    commit = repo.commit({"test_a.py": suite})

    result = check(repo.path, commit, PYTEST, 60, OFF)

    assert result.status is CheckStatus.PASS
    assert result.details["counts"] == {"passed": 2, "failed": 0, "errors": 0, "skipped": 1}


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


def test_output_saying_passed_with_exit_code_1_fails(repo: GitRepo) -> None:
    commit = repo.commit({"test_a.py": PASSING})
    liar = ["{python}", "-c", "print('===== 5 passed in 0.01s ====='); raise SystemExit(1)"]

    result = check(repo.path, commit, liar, 60, OFF)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.failed"]
    assert "5 passed" in result.details["output_excerpt"]


def test_a_pytest_named_runner_of_the_repository_exiting_0_never_finishes_a_session(
    repo: GitRepo,
) -> None:
    """A script in the copy is the repository's own runner: it runs as configured, and
    without our plugin nothing shows that a pytest session ran to its end."""
    repo.write({"pytest-quick": f"#!{sys.executable}\nprint('5 passed')\n"})
    (repo.path / "pytest-quick").chmod(0o755)
    commit = repo.commit()

    result = check(repo.path, commit, ["./pytest-quick"], 60, OFF)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.no_session_finish"]
    assert result.details["argv"][0] == "./pytest-quick"
    assert result.details["results"]["session_finished"] is False


def test_other_runner_exiting_0_is_inconclusive_as_nothing_was_counted(repo: GitRepo) -> None:
    commit = repo.commit({"check.py": "print('Ran 0 tests')\n"})

    result = check(repo.path, commit, ["{python}", "check.py"], 60, OFF)

    assert result.status is CheckStatus.ERROR
    assert _codes(result) == ["tests.uncounted"]
    assert result.details["tests_counted"] is False
    assert result.details["counts"] is None


def test_other_runner_exiting_1_still_fails(repo: GitRepo) -> None:
    commit = repo.commit({"check.py": "raise SystemExit(1)\n"})

    result = check(repo.path, commit, ["{python}", "check.py"], 60, OFF)

    assert _codes(result) == ["tests.failed"]


def test_a_fifo_in_place_of_the_junit_report_does_not_hang(repo: GitRepo) -> None:
    conftest = (
        "import os\n\n\ndef pytest_unconfigure(config):\n"
        "    path = config.option.xmlpath\n"
        "    if path:\n"
        "        os.unlink(path)\n"
        "        os.mkfifo(path)\n"
    )
    commit = repo.commit({"conftest.py": conftest, "test_a.py": PASSING})

    result = check(repo.path, commit, PYTEST, 60, OFF)

    assert _codes(result) == ["tests.no_report"]
    assert "not a regular file" in result.findings[0].message


def test_hanging_tests_fail_with_timeout(repo: GitRepo) -> None:
    commit = repo.commit({"test_a.py": "import time\n\n\ndef test_hang():\n    time.sleep(60)\n"})

    result = check(repo.path, commit, PYTEST, 1.5, OFF)

    assert result.status is CheckStatus.FAIL
    (finding,) = result.findings
    assert finding.code == "tests.timeout"
    assert finding.expected == "finished within 1.5s"
    assert result.details["timed_out"] is True
    assert result.details["exit_code"] is None
    assert result.duration_s < 15


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
    assert set(child_env) <= set(runner.minimal_env(Path("h"), Path("t")))


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


def test_user_junitxml_option_cannot_redirect_the_report(repo: GitRepo, tmp_path: Path) -> None:
    commit = repo.commit({"test_a.py": PASSING})
    elsewhere = tmp_path / "theirs.xml"

    result = check(repo.path, commit, [*PYTEST, f"--junitxml={elsewhere}"], 60, OFF)

    assert result.status is CheckStatus.PASS
    assert result.details["counts"]["passed"] == 2
    assert not elsewhere.exists()
    assert os.path.basename(result.details["argv"][-3]) == "junit.xml"


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


@pytest.mark.parametrize(
    "url", ["sqlite+pysqlite:///{db}", "sqlite:///{db}?timeout=5"], ids=["driver", "query"]
)
def test_the_sqlite_database_is_hidden_whatever_the_url_form(
    repo: GitRepo, tmp_path: Path, url: str
) -> None:
    from verifier.checks.tests.check import _hidden_paths

    db = tmp_path / "v.sqlite3"
    config = replace(Config(), database_url=url.format(db=db))
    assert db in _hidden_paths(repo.path, config, keep=[])


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


# Reading our pytest plugin's channel and pytest's summary line -----------------------------


def test_the_summary_line_is_read_in_every_form_pytest_prints_it() -> None:
    from verifier.checks.tests.results import parse_pytest_summary

    loud = "x\n===== 1 failed, 2 passed, 3 warnings, 1 error in 0.12s (0:00:00) =====\n"
    coloured = "\x1b[32m\x1b[1m2 passed\x1b[0m\x1b[32m in 0.01s\x1b[0m\n"
    assert parse_pytest_summary(loud) == {
        "passed": 2, "failed": 1, "error": 1, "skipped": 0, "xfailed": 0, "xpassed": 0
    }  # fmt: skip
    assert parse_pytest_summary(coloured)["passed"] == 2  # type: ignore[index]
    assert parse_pytest_summary("no tests ran in 0.01s\n") == dict.fromkeys(
        ("passed", "failed", "error", "skipped", "xfailed", "xpassed"), 0
    )
    # The last summary line counts: one printed after pytest's own is what is compared.
    assert parse_pytest_summary("2 passed in 0.1s\n7 passed in 0.01s\n")["passed"] == 7  # type: ignore[index]
    assert parse_pytest_summary("ok\n2 passed, and that is all\n") is None


def test_channel_lines_cut_short_unknown_or_after_the_end_are_problems() -> None:
    from verifier.checks.tests.results import read_pytest_events

    report = (
        b'{"event":"report","nodeid":"t::a","when":"call","outcome":"passed","category":"passed"}\n'
    )
    finish = b'{"event":"session_finish","exitstatus":0}\n'

    clean = read_pytest_events(report + finish)
    assert (clean.exitstatus, clean.problem, clean.counts.tests) == (0, None, 1)
    assert read_pytest_events(report + finish + report).problem == (
        "line 3: an event after the session finished"
    )
    assert read_pytest_events(b"junk\n" + report + finish).problem == (
        "line 1 is not an event of our plugin"
    )
    cut = read_pytest_events(report + finish[:-5])
    assert cut.exitstatus is None
    assert cut.problem is not None and "cut short" in cut.problem


def test_a_teardown_error_after_a_failed_call_is_a_case_of_its_own_as_in_junit() -> None:
    from verifier.checks.tests.results import read_pytest_events

    lines = [
        {"event": "report", "nodeid": "t::a", "when": "call", "outcome": "failed"},
        {"event": "report", "nodeid": "t::a", "when": "teardown", "outcome": "failed"},
        {"event": "report", "nodeid": "t::b", "when": "setup", "outcome": "skipped"},
    ]
    run = read_pytest_events(b"".join(json.dumps(e).encode() + b"\n" for e in lines))

    assert run.counts.to_dict() == {"passed": 0, "failed": 1, "errors": 1, "skipped": 1}
    assert run.counts.tests == 3
