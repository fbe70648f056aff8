"""Judging a finished run (`verifier.checks.tests.judge`): alone, on outcomes made here,
and through the check, run for real on git repositories holding small suites."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.channel import sealed
from tests.support.gitrepo import GitRepo
from verifier._internal.sandbox.runner import RunOutcome
from verifier._internal.snapshot import SnapshotInfo
from verifier.checks.tests import judge
from verifier.checks.tests.check import check
from verifier.checks.tests.judge import Reading
from verifier.checks.tests.results import OutcomeCounts
from verifier.config import Config, RepositoryConfig
from verifier.findings import CheckResult, CheckStatus, Finding

PYTEST = ("{python}", "-m", "pytest", "-q")
OFF = Config(network_isolation="off")

PASSING = "def test_one():\n    assert 1 + 1 == 2\n\n\ndef test_two():\n    assert 'a' in 'abc'\n"
FAILING = "def test_broken():\n    assert 1 == 2\n"


def _codes(result: CheckResult) -> list[str]:
    return [f.code for f in result.findings]


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "r")


# The judge alone: outcomes made here ----------------------------------------------------

COUNTED = OutcomeCounts(tests=3, failures=0, errors=0, skipped=1)
SNAPSHOT = SnapshotInfo("commit", "c" * 40, files=2, bytes=10, symlinks=0)
REPORT = (
    b'{"event":"report","nodeid":"t::a","when":"call","outcome":"passed","category":"passed"}\n'
)
FINISH = b'{"event":"session_finish","exitstatus":0}\n'
CHANNEL = sealed(REPORT.strip(), FINISH.strip())  # as our monitor seals them


def outcome(**changes: object) -> RunOutcome:
    ran = RunOutcome(
        argv=("/usr/bin/python3", "-m", "pytest"),
        executable="/usr/bin/python3",
        exit_code=0,
        timed_out=False,
        duration_s=1.0,
        output_excerpt="",
        output_sha256="",
        output_bytes=0,
        network_isolated=True,
        sandbox="bwrap",
    )
    return replace(ran, **changes)  # type: ignore[arg-type]


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def test_a_timeout_decides_before_anything_else() -> None:
    killed = outcome(exit_code=None, timed_out=True, duration_s=1.6)

    (finding,) = judge.judge(killed, Reading("pytest", {}, COUNTED), 1.5, is_pytest=True)

    assert (finding.code, finding.expected, finding.found) == (
        "tests.timeout",
        "finished within 1.5s",
        "killed after 1.6s",
    )


def test_the_exit_code_decides_before_any_count() -> None:
    reading = Reading("junit", {}, COUNTED)

    assert codes(judge.judge(outcome(exit_code=1), reading, 60, is_pytest=False)) == [
        "tests.failed"
    ]
    # pytest's 5 is "no tests collected", however its results are read.
    assert codes(judge.judge(outcome(exit_code=5), reading, 60, is_pytest=True)) == [
        "tests.none_ran"
    ]
    assert codes(judge.judge(outcome(exit_code=5), reading, 60, is_pytest=False)) == [
        "tests.failed"
    ]


def test_unittest_exit_code_5_with_no_test_run_is_none_ran() -> None:
    none = Reading("unittest", {}, OutcomeCounts(0, 0, 0, 0))

    assert codes(judge.judge(outcome(exit_code=5), none, 60, is_pytest=False)) == ["tests.none_ran"]


def test_counts_that_cannot_be_read_are_no_report_never_a_pass() -> None:
    unreadable = Reading("unittest", {}, None, "the unittest result: missing")

    (finding,) = judge.judge(outcome(), unreadable, 60, is_pytest=False)

    assert (finding.code, finding.found) == ("tests.no_report", "the unittest result: missing")


@pytest.mark.parametrize(
    ("counts", "code"),
    [
        (OutcomeCounts(3, 1, 0, 0), "tests.failed"),
        (OutcomeCounts(3, 0, 1, 0), "tests.failed"),
        (OutcomeCounts(0, 0, 0, 0), "tests.none_ran"),
        (OutcomeCounts(2, 0, 0, 2), "tests.all_skipped"),
    ],
    ids=["failure", "error", "none", "all-skipped"],
)
def test_counts_after_exit_0_that_prove_no_pass_fail(counts: OutcomeCounts, code: str) -> None:
    assert codes(judge.judge(outcome(), Reading("junit", {}, counts), 60, False)) == [code]


def test_runs_with_nothing_to_count_are_judged_by_their_exit_code() -> None:
    for kind in ("exit-code", "uncounted"):
        assert judge.judge(outcome(), Reading(kind, {}), 60, is_pytest=False) == []


def verdict(ran: RunOutcome, reading: Reading, config: Config) -> CheckResult:
    return judge.verdict(
        ran,
        reading,
        timeout_s=60,
        is_pytest=reading.kind == "pytest",
        mode="commit",
        snapshot=SNAPSHOT,
        config=config,
        repository=RepositoryConfig("app"),
    )


def test_a_pass_without_a_sandbox_under_auto_is_unsandboxed_and_a_failure_stays_one() -> None:
    bare = outcome(sandbox="none", notes=("bwrap: not found", "the command ran without a sandbox"))
    auto = Config(network_isolation="auto")

    result = verdict(bare, Reading("junit", {}, COUNTED), auto)

    assert (result.status, codes(list(result.findings))) == (
        CheckStatus.ERROR,
        ["tests.unsandboxed"],
    )
    assert "(bwrap: not found)" in result.findings[0].message
    assert result.details["sandbox"] == "none"
    failed = verdict(replace(bare, exit_code=1), Reading("junit", {}, COUNTED), auto)
    assert (failed.status, codes(list(failed.findings))) == (CheckStatus.FAIL, ["tests.failed"])


def test_network_isolation_off_passes_with_a_note() -> None:
    off = Config(network_isolation="off")

    result = verdict(outcome(sandbox="none"), Reading("junit", {}, COUNTED), off)

    assert result.status is CheckStatus.PASS
    assert result.notes == ('network_isolation = "off": nothing was isolated',)


def test_an_uncounted_pass_is_an_error_that_names_the_repositorys_table() -> None:
    make = outcome(argv=("/usr/bin/make", "test"))

    result = verdict(make, Reading("uncounted", {}), Config())

    assert result.status is CheckStatus.ERROR
    (finding,) = result.findings
    assert finding.code == "tests.uncounted"
    assert finding.message.startswith("'make' exited 0")
    assert "[repositories.app]" in finding.message
    assert result.details["tests_counted"] is False


def test_exit_code_results_pass_with_the_note_that_nothing_was_counted() -> None:
    result = verdict(outcome(), Reading("exit-code", {}), Config())

    assert result.status is CheckStatus.PASS
    assert result.notes[0].startswith('tests not counted: results = "exit-code"')


def test_a_failed_pytest_run_fails_with_the_details_of_the_run() -> None:
    result = verdict(outcome(exit_code=1), Reading("pytest", {"source": "pytest"}), Config())

    assert (result.status, codes(list(result.findings))) == (CheckStatus.FAIL, ["tests.failed"])
    assert result.details["results"] == {"source": "pytest"}
    assert result.details["exit_code"] == 1


def test_the_details_say_what_the_verdict_rests_on() -> None:
    read = {"source": "junit"}

    details = judge.details(outcome(), "commit", SNAPSHOT, Reading("junit", read, COUNTED))

    assert details["counts"] == {"passed": 2, "failed": 0, "errors": 0, "skipped": 1}
    assert (details["tests_counted"], details["mode"], details["results"]) == (True, "commit", read)
    assert details["snapshot"] == {"files": 2, "bytes": 10, "symlinks": 0, "skipped": []}
    assert judge.details(outcome(), "commit", SNAPSHOT, Reading("uncounted", {}))["counts"] is None


def test_junit_results_are_read_from_the_globs_and_the_files_named(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "r.xml").write_text(
        '<testsuite><testcase name="a"/><testcase name="b"><failure/></testcase></testsuite>'
    )
    globs = RepositoryConfig("app", results="junit", results_junit=("reports/*.xml",))
    read: dict[str, object] = {"source": "junit"}

    reading = judge.read_results(
        "junit", read, outcome(), tmp_path, tmp_path / "junit.xml", b"", False, globs
    )

    assert reading.counts == OutcomeCounts(2, 1, 0, 0)
    assert (reading.problem, reading.agreement) == (None, None)
    assert read["files"] == ["reports/r.xml"]


def test_pytests_plugin_events_are_the_counts_and_the_other_sources_must_agree(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuite><testcase name="a"/></testsuite>')
    app = RepositoryConfig("app")

    agreed = judge.read_results("pytest", {}, outcome(), tmp_path, junit, CHANNEL, False, app)
    assert (agreed.counts, agreed.agreement) == (OutcomeCounts(1, 0, 0, 0), None)
    assert agreed.read["session_finished"] is True

    other_exit = judge.read_results(
        "pytest",
        {},
        outcome(exit_code=3),
        tmp_path,
        junit,
        CHANNEL,
        False,
        app,
    )
    assert other_exit.agreement is not None
    assert other_exit.agreement.code == "tests.results_disagree"
    assert other_exit.agreement.found == "exit code 3"

    unfinished = judge.read_results("pytest", {}, outcome(), tmp_path, junit, REPORT, False, app)
    assert unfinished.agreement is not None
    assert unfinished.agreement.code == "tests.no_session_finish"

    overflowed = judge.read_results("pytest", {}, outcome(), tmp_path, junit, CHANNEL, True, app)
    assert overflowed.agreement is not None
    assert overflowed.agreement.found == "over the bound, or a writer outlived the run"


def test_a_missing_junit_report_of_pytest_is_a_problem_not_counts(tmp_path: Path) -> None:
    reading = judge.read_results(
        "pytest", {}, outcome(), tmp_path, tmp_path / "junit.xml", CHANNEL, False,
        RepositoryConfig("app"),
    )  # fmt: skip

    assert reading.problem is not None and reading.problem.startswith("the JUnit report junit.xml")
    assert reading.read["junit"] is None
    assert reading.counts == OutcomeCounts(1, 0, 0, 0)  # the plugin's, as the tests ran


def test_an_error_is_timed_from_its_start() -> None:
    result = judge.error(time.monotonic() - 2, "tests.runner_failed", "no", mode="commit")

    assert (result.status, result.details) == (CheckStatus.ERROR, {"mode": "commit"})
    assert 2 <= result.duration_s < 60


# Through the check, run for real --------------------------------------------------------


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
