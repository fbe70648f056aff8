"""Test runners other than pytest, run for real: how each run's results are read.

Real git repositories, the real tests check, in the sandbox where it works
(`Config()` is ``network_isolation = "auto"``). docs/runners.md has the same
configurations as examples.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import fixed_session, to_bytes
from verifier._internal.sandbox import runner
from verifier.checks.tests import runners
from verifier.checks.tests.check import check
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.errors import ConfigError
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus
from verifier.formats import render
from verifier.verify import Options, verify

SANDBOX = Config()  # the sandbox when it works here, as in production
OFF = Config(network_isolation="off")
PYTEST = ("{python}", "-m", "pytest", "-q")
PASSING = "def test_one():\n    assert 1 + 1 == 2\n\n\ndef test_two():\n    assert 'a' in 'abc'\n"
UNITTEST = ("{python}", "-m", "unittest", "-v")
NODE = (
    "node",
    "--test",
    "--test-reporter=junit",
    "--test-reporter-destination=reports/junit.xml",
)
REPORTS = RepositoryConfig("app", results="junit", results_junit=("reports/*.xml",))

UT_PASSING = (
    "import unittest\n\n\n"
    "class Calc(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n\n"
    "    def test_in(self):\n        self.assertIn('a', 'abc')\n"
)
UT_FAILING = (
    "import unittest\n\n\n"
    "class Calc(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n\n"
    "    def test_broken(self):\n        self.assertEqual(1, 2)\n"
)
NODE_PASSING = (
    "const test = require('node:test');\n"
    "const assert = require('node:assert');\n"
    "test('adds', () => { assert.strictEqual(1 + 1, 2); });\n"
    "test('concatenates', () => { assert.strictEqual('a' + 'b', 'ab'); });\n"
)
NODE_FAILING = NODE_PASSING + "test('breaks', () => { assert.strictEqual(1, 2); });\n"
# A report an agent could commit: fifty passing cases that no run produced.
FAKE_REPORT = (
    '<?xml version="1.0"?>\n<testsuites tests="50" failures="0">'
    + '<testcase name="fake" classname="x"/>' * 50
    + "</testsuites>\n"
)

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def _codes(result: CheckResult) -> list[str]:
    return [f.code for f in result.findings]


@pytest.fixture
def app(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "app")


# which runner, and the command through our entry ----------------------------------------


@pytest.mark.parametrize(
    ("argv", "command", "kind"),
    [
        (["/py", "-m", "pytest", "-q"], ["{python}", "-m", "pytest", "-q"], "pytest"),
        (["/py", "-mpytest"], ["{python}", "-mpytest"], "pytest"),
        (["pytest", "-x"], ["pytest", "-x"], "pytest"),
        (["./py.test-quick"], ["./py.test-quick"], "pytest"),
        (["/py", "-m", "unittest", "-v"], ["{python}", "-m", "unittest", "-v"], "unittest"),
        (["python3.11", "-munittest"], ["python3.11", "-munittest"], "unittest"),
        (["/opt/run", "-m", "unittest"], ["/opt/run", "-m", "unittest"], "uncounted"),
        (["/py", "-c", "import unittest"], ["{python}", "-c", "import unittest"], "uncounted"),
        (["make", "test"], ["make", "test"], "uncounted"),
    ],
)
def test_the_kind_of_run_is_read_from_the_command(
    argv: list[str], command: list[str], kind: str
) -> None:
    assert runners.results_kind(argv, command, RepositoryConfig("app")) == kind


def test_the_repositorys_results_setting_wins_over_the_command() -> None:
    pytest_argv = ["/py", "-m", "pytest"]
    assert runners.results_kind(pytest_argv, pytest_argv, REPORTS) == "junit"
    assert runners.results_kind(pytest_argv, pytest_argv, EXIT_CODE) == "exit-code"


def test_pytest_runs_through_our_entry_with_our_options_last_but_before_a_double_dash(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "junit.xml"
    argv = ["/py", "-X", "dev", "-m", "pytest", "-q", "--", "t.py"]

    rewritten = runners.with_pytest_entry(argv, tmp_path, junit, 7, os.defpath)

    entry = str(tmp_path / "runner" / "pytest_entry.py")
    spec = str(tmp_path / "runner" / "spec.json")
    ours = [f"--junitxml={junit}", "-p", "no:cacheprovider"]
    assert rewritten == ["/py", "-X", "dev", "-s", entry, "7", spec, "-q", *ours, "--", "t.py"]
    assert sorted(os.listdir(tmp_path / "runner")) == [
        "pytest_entry.py",
        "pytest_reporter.py",
        "spec.json",
    ]
    assert json.loads(Path(spec).read_text()) == {"plugins": None, "declared": [], "untrusted": []}
    (tmp_path / "b").mkdir()
    runners.with_pytest_entry(
        argv, tmp_path / "b", junit, 7, os.defpath, ("xdist",), untrusted=[Path("/srv/r")]
    )
    assert json.loads((tmp_path / "b" / "runner" / "spec.json").read_text()) == {
        "plugins": ["xdist"],
        "declared": [],
        "untrusted": ["/srv/r"],
    }
    (tmp_path / "s").mkdir()
    runners.with_pytest_entry(argv, tmp_path / "s", junit, 7, os.defpath, select=["t.py::a"])
    assert json.loads((tmp_path / "s" / "runner" / "spec.json").read_text())["select"] == [
        "t.py::a"
    ]
    (tmp_path / "c").mkdir()
    runners.with_pytest_entry(argv, tmp_path / "c", junit, 7, os.defpath, "all", declared=["a-b"])
    assert json.loads((tmp_path / "c" / "runner" / "spec.json").read_text()) == {
        "plugins": "all",
        "declared": ["a-b"],
        "untrusted": [],
    }


def test_a_script_of_the_repository_named_pytest_runs_as_it_is(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"

    rewritten = runners.with_pytest_entry(["./pytest-quick", "-q"], tmp_path, junit, 7, "")

    assert rewritten == ["./pytest-quick", "-q", f"--junitxml={junit}", "-p", "no:cacheprovider"]


def test_a_pytest_script_on_the_path_runs_with_the_python_of_its_first_line(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pytest").write_text(f"#!{sys.executable}\nimport pytest\n")
    (bin_dir / "pytest").chmod(0o755)
    (bin_dir / "tool").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "tool").chmod(0o755)

    rewritten = runners.with_pytest_entry(
        ["pytest", "-q"], tmp_path, tmp_path / "j.xml", 7, str(bin_dir)
    )

    assert rewritten[:2] == [sys.executable, "-s"]
    (tmp_path / "other").mkdir()
    shell = [str(bin_dir / "tool")]  # not Python: it runs as configured
    assert (
        runners.with_pytest_entry(shell, tmp_path / "other", tmp_path / "j.xml", 7, "")[0]
        == (shell[0])
    )


def test_unittest_runs_through_our_entry_with_its_arguments(tmp_path: Path) -> None:
    for argv in (
        ["/py", "-m", "unittest", "-v", "discover"],
        ["/py", "-munittest", "-v", "discover"],
    ):
        rewritten = runners.with_unittest_entry(argv, tmp_path, 9)

        assert rewritten == ["/py", str(tmp_path / "unittest_entry.py"), "9", "-v", "discover"]


def test_python_is_the_venvs_the_named_one_or_the_verifiers(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = tmp_path / "py" / "bin" / "python3"

    assert runners.interpreter(RepositoryConfig("app", venv=venv)) == (
        str(venv / "bin" / "python"),
        [venv / "bin"],
    )
    assert runners.interpreter(RepositoryConfig("app", python=python)) == (
        str(python),
        [python.parent],
    )
    assert runners.interpreter(RepositoryConfig("app")) == (sys.executable, [])


def test_the_childs_environment_is_minimal_with_the_interpreters_folder_first(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"

    env = runners.child_env(
        tmp_path / "h", tmp_path / "t", [venv / "bin"], RepositoryConfig("app", venv=venv)
    )

    assert env["PATH"].split(os.pathsep)[0] == str(venv / "bin")
    assert (env["HOME"], env["TMPDIR"], env["VIRTUAL_ENV"]) == (
        str(tmp_path / "h"),
        str(tmp_path / "t"),
        str(venv),
    )
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONDONTWRITEBYTECODE",
                        "PYTHONHASHSEED", "VIRTUAL_ENV",
                        "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}  # fmt: skip
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"


# pytest, by default ---------------------------------------------------------------------


def test_pytest_is_counted_by_default_through_our_plugin_and_its_junit_report(app: GitRepo) -> None:
    commit = app.commit({"test_a.py": "def test_one():\n    assert True\n"})

    result = check(app.path, commit, ("{python}", "-m", "pytest", "-q"), 60, SANDBOX)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    read = result.details["results"]
    assert (read["source"], read["channel"]) == ("pytest", "our pytest plugin, through a pipe")
    assert (read["session_finished"], read["session_exitstatus"]) == (True, 0)
    assert read["junit"] == result.details["counts"]
    assert read["summary"] == read["reported"]
    assert read["guarantee"].startswith("reported by our plugin as each test finished")
    assert result.details["counts"]["passed"] == 1


def test_user_junitxml_option_cannot_redirect_the_report(app: GitRepo, tmp_path: Path) -> None:
    commit = app.commit({"test_a.py": PASSING})
    elsewhere = tmp_path / "theirs.xml"

    result = check(app.path, commit, [*PYTEST, f"--junitxml={elsewhere}"], 60, OFF)

    assert result.status is CheckStatus.PASS
    assert result.details["counts"]["passed"] == 2
    assert not elsewhere.exists()
    assert os.path.basename(result.details["argv"][-3]) == "junit.xml"


# unittest, through our entry -------------------------------------------------------------


def test_unittest_passing_suite_is_counted_by_our_entry(app: GitRepo) -> None:
    commit = app.commit({"test_calc.py": UT_PASSING})

    result = check(app.path, commit, UNITTEST, 60, SANDBOX)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["tests_counted"] is True
    assert result.details["counts"] == {"passed": 2, "failed": 0, "errors": 0, "skipped": 0}
    assert result.details["results"]["source"] == "unittest"
    assert result.details["results"]["guarantee"].startswith("reported by our entry")
    assert result.details["argv"][1].endswith("unittest_entry.py")
    assert result.details["argv"][3:] == ["-v"]
    assert "Ran 2 tests" in result.details["output_excerpt"]


def test_unittest_failing_test_fails_with_its_counts(app: GitRepo) -> None:
    commit = app.commit({"test_calc.py": UT_FAILING})

    result = check(app.path, commit, UNITTEST, 60, SANDBOX)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.failed"]
    assert result.details["counts"] == {"passed": 1, "failed": 1, "errors": 0, "skipped": 0}


def test_unittest_running_zero_tests_is_none_ran_not_a_pass(app: GitRepo) -> None:
    commit = app.commit({"calc.py": "x = 1\n"})

    result = check(app.path, commit, UNITTEST, 60, SANDBOX)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.none_ran"]
    assert result.details["counts"]["passed"] == 0


def test_unittest_with_every_test_skipped_fails(app: GitRepo) -> None:
    skipped = (
        "import unittest\n\n\n@unittest.skip('later')\nclass Later(unittest.TestCase):\n"
        "    def test_x(self):\n        pass\n"
    )
    commit = app.commit({"test_later.py": skipped})

    result = check(app.path, commit, UNITTEST, 60, SANDBOX)

    assert _codes(result) == ["tests.all_skipped"]


def test_unittest_discovery_arguments_and_a_bare_python_are_passed_through(
    app: GitRepo,
) -> None:
    commit = app.commit({"tests/__init__.py": "", "tests/check_calc.py": UT_PASSING})
    python = os.path.basename(sys.executable)  # "python3" or so, found on PATH
    command = (python, "-m", "unittest", "discover", "-s", "tests", "-p", "check_*.py")

    result = check(app.path, commit, command, 60, SANDBOX)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["counts"]["passed"] == 2


def test_unittest_that_leaves_no_result_cannot_pass(app: GitRepo) -> None:
    # A test that ends the process at once, status 0: unittest never gets to count.
    sneaky = (
        "import os\nimport unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_x(self):\n        os._exit(0)\n"
    )
    commit = app.commit({"test_sneaky.py": sneaky})

    result = check(app.path, commit, UNITTEST, 60, SANDBOX)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.no_report"]
    assert "unittest result" in result.findings[0].message


def test_unittest_counts_written_again_by_the_code_under_test_cannot_pass(app: GitRepo) -> None:
    """The counts travel on a pipe: a second set, from an atexit hook that finds the
    descriptor, is a line too many, never the counts that win."""
    forger = (
        "import atexit, json, os, sys, unittest\n\n\n"
        "def _forge():\n"
        "    fd = int(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[2])\n"
        "    counts = dict(tests_run=1, failures=0, errors=0, skipped=0,\n"
        "                  expected_failures=0, unexpected_successes=0)\n"
        "    os.write(fd, json.dumps(counts).encode() + b'\\n')\n"
        "    os._exit(0)\n\n\n"
        "atexit.register(_forge)\n\n\n"
        "class T(unittest.TestCase):\n    def test_x(self):\n        self.assertEqual(1, 2)\n"
    )
    commit = app.commit({"test_forger.py": forger})

    result = check(app.path, commit, UNITTEST, 60, SANDBOX)

    assert result.status is CheckStatus.FAIL, result.details["output_excerpt"]
    assert result.details["exit_code"] == 0
    assert _codes(result) == ["tests.no_report"]
    assert "something else wrote to our channel" in result.findings[0].message


# node's built-in test runner with its JUnit reporter ---------------------------------------


@needs_node
def test_node_test_runner_passing_suite_is_counted_from_its_junit_report(app: GitRepo) -> None:
    commit = app.commit({"test/math.test.js": NODE_PASSING, "package.json": "{}\n"})

    result = check(app.path, commit, NODE, 60, SANDBOX, repository=REPORTS)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["counts"] == {"passed": 2, "failed": 0, "errors": 0, "skipped": 0}
    assert result.details["results"] == {
        "source": "junit",
        "guarantee": "files the command wrote",
        "globs": ["reports/*.xml"],
        "removed_before_run": [],
        "files": ["reports/junit.xml"],
    }


@needs_node
def test_node_test_runner_failing_test_fails(app: GitRepo) -> None:
    commit = app.commit({"test/math.test.js": NODE_FAILING})

    result = check(app.path, commit, NODE, 60, SANDBOX, repository=REPORTS)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.failed"]
    assert result.details["counts"] == {"passed": 2, "failed": 1, "errors": 0, "skipped": 0}


@needs_node
def test_a_committed_junit_report_is_removed_before_the_run_and_never_counted(
    app: GitRepo,
) -> None:
    commit = app.commit({"test/math.test.js": NODE_PASSING, "reports/junit.xml": FAKE_REPORT})
    before = app.snapshot()

    result = check(app.path, commit, NODE, 60, SANDBOX, repository=REPORTS)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["counts"]["passed"] == 2  # the run's two, not the fake fifty
    assert result.details["results"]["removed_before_run"] == ["reports/junit.xml"]
    assert app.snapshot() == before  # removed from the copy only


@needs_node
def test_a_committed_report_and_a_run_that_writes_none_is_no_report(app: GitRepo) -> None:
    commit = app.commit({"test/math.test.js": NODE_PASSING, "reports/junit.xml": FAKE_REPORT})
    spec_only = ("node", "--test", "--test-reporter=spec")

    result = check(app.path, commit, spec_only, 60, SANDBOX, repository=REPORTS)

    assert result.details["exit_code"] == 0
    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.no_report"]
    assert "no file matches ['reports/*.xml']" in result.findings[0].message
    assert result.details["results"]["removed_before_run"] == ["reports/junit.xml"]


@needs_node
def test_node_running_no_test_file_is_none_ran(app: GitRepo) -> None:
    commit = app.commit({"index.js": "module.exports = 1;\n"})

    result = check(app.path, commit, NODE, 60, SANDBOX, repository=REPORTS)

    assert result.details["exit_code"] == 0
    assert _codes(result) == ["tests.none_ran"]


# any runner that writes JUnit XML -----------------------------------------------------------


def _writer(xml: str, exit_code: int = 0) -> str:
    """A "runner" that writes `xml` as its report and exits with `exit_code`."""
    return (
        "import os\n"
        "os.makedirs('out/junit', exist_ok=True)\n"
        f"open('out/junit/TEST-calc.xml', 'w').write({xml!r})\n"
        f"raise SystemExit({exit_code})\n"
    )


JUNIT_ANY = RepositoryConfig("app", results="junit", results_junit=("out/**/*.xml",))


def test_a_junit_file_without_suite_attributes_is_counted_by_its_testcases(app: GitRepo) -> None:
    xml = (
        "<testsuites><testsuite name='calc'>"
        "<testcase name='a'/><testcase name='b'><system-out>hi</system-out></testcase>"
        "<testcase name='c'><skipped/></testcase>"
        "</testsuite></testsuites>"
    )
    commit = app.commit({"run.py": _writer(xml)})

    result = check(app.path, commit, ("{python}", "run.py"), 60, SANDBOX, repository=JUNIT_ANY)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["counts"] == {"passed": 2, "failed": 0, "errors": 0, "skipped": 1}
    assert result.details["results"]["files"] == ["out/junit/TEST-calc.xml"]


def test_suite_attributes_that_claim_success_do_not_hide_a_failed_case(app: GitRepo) -> None:
    xml = (
        "<testsuite tests='2' failures='0' errors='0'>"
        "<testcase name='a'/><testcase name='b'><error message='boom'/></testcase>"
        "</testsuite>"
    )
    commit = app.commit({"run.py": _writer(xml)})

    result = check(app.path, commit, ("{python}", "run.py"), 60, SANDBOX, repository=JUNIT_ANY)

    assert result.status is CheckStatus.FAIL
    assert _codes(result) == ["tests.failed"]
    assert result.findings[0].found == "0 failures, 1 errors"


def test_a_nonzero_exit_fails_first_whatever_the_report_says(app: GitRepo) -> None:
    commit = app.commit({"run.py": _writer("<testsuite><testcase name='a'/></testsuite>", 2)})

    result = check(app.path, commit, ("{python}", "run.py"), 60, SANDBOX, repository=JUNIT_ANY)

    assert _codes(result) == ["tests.failed"]
    assert result.findings[0].found == "exit code 2"


def test_a_report_that_links_outside_the_copy_is_not_read(app: GitRepo, tmp_path: Path) -> None:
    outside = tmp_path / "outside.xml"
    outside.write_text("<testsuite><testcase name='a'/></testsuite>")
    linker = (
        "import os\nos.makedirs('out', exist_ok=True)\n"
        f"os.symlink({str(outside)!r}, 'out/TEST-x.xml')\n"
    )
    commit = app.commit({"run.py": linker})

    result = check(app.path, commit, ("{python}", "run.py"), 60, SANDBOX, repository=JUNIT_ANY)

    assert _codes(result) == ["tests.no_report"]
    assert "out/TEST-x.xml" in result.findings[0].message
    assert "link" in result.findings[0].message


def test_a_report_that_is_not_xml_is_no_report(app: GitRepo) -> None:
    commit = app.commit({"run.py": _writer("all 5 passed")})

    result = check(app.path, commit, ("{python}", "run.py"), 60, SANDBOX, repository=JUNIT_ANY)

    assert _codes(result) == ["tests.no_report"]
    assert "not XML" in result.findings[0].message


# results = "exit-code", and the default for other runners ---------------------------------


EXIT_CODE = RepositoryConfig("app", results="exit-code")


def test_exit_code_results_pass_on_exit_0_with_a_note_that_nothing_was_counted(
    app: GitRepo,
) -> None:
    commit = app.commit({"check.py": "print('fine')\n"})

    result = check(app.path, commit, ("{python}", "check.py"), 60, SANDBOX, repository=EXIT_CODE)

    assert result.status is CheckStatus.PASS
    assert result.details["tests_counted"] is False
    assert result.details["counts"] is None
    assert result.notes and "not counted" in result.notes[0]
    assert result.to_dict()["notes"] == list(result.notes)


def test_exit_code_results_keep_their_note_when_the_run_fails(app: GitRepo) -> None:
    commit = app.commit({"check.py": "raise SystemExit(1)\n"})

    result = check(app.path, commit, ("{python}", "check.py"), 60, SANDBOX, repository=EXIT_CODE)

    assert result.status is CheckStatus.FAIL
    assert result.notes == (
        'tests not counted: results = "exit-code" judges the run by its exit code alone',
        *runners.guarantee_notes("exit-code"),
    )
    assert "not configured by the verifier" in result.notes[1]


def test_exit_code_results_still_fail_on_a_nonzero_exit(app: GitRepo) -> None:
    commit = app.commit({"check.py": "raise SystemExit(3)\n"})

    result = check(app.path, commit, ("{python}", "check.py"), 60, SANDBOX, repository=EXIT_CODE)

    assert _codes(result) == ["tests.failed"]


def test_an_unconfigured_runner_is_uncounted_and_told_how_to_configure_results(
    app: GitRepo,
) -> None:
    commit = app.commit({"check.py": "print('ok')\n"})
    repository = RepositoryConfig("app")

    result = check(app.path, commit, ("{python}", "check.py"), 60, SANDBOX, repository=repository)

    assert result.status is CheckStatus.ERROR
    assert _codes(result) == ["tests.uncounted"]
    message = result.findings[0].message
    assert "[repositories.app]" in message
    assert "results = { junit = " in message
    assert 'results = "exit-code"' in message
    assert "docs/runners.md" in message


# the repository's own interpreter ----------------------------------------------------------


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real virtual environment holding a module and a program the verifier's has not."""
    path = tmp_path_factory.mktemp("envs") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    purelib = subprocess.run(
        [
            str(path / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "venvonly.py").write_text("ANSWER = 42\n")
    tool = path / "bin" / "venv-only-tool"
    tool.write_text("#!/bin/sh\necho from the venv\n")
    tool.chmod(0o755)
    return path


VENV_TEST = (
    "import unittest\n\nimport venvonly\n\n\n"
    "class Uses(unittest.TestCase):\n"
    "    def test_dependency(self):\n        self.assertEqual(venvonly.ANSWER, 42)\n"
)


def test_a_venv_named_for_the_repository_runs_its_tests_with_its_dependencies(
    app: GitRepo, venv: Path
) -> None:
    commit = app.commit({"test_dep.py": VENV_TEST})
    repository = RepositoryConfig("app", venv=venv)

    with_venv = check(app.path, commit, UNITTEST, 60, SANDBOX, repository=repository)
    without = check(app.path, commit, UNITTEST, 60, SANDBOX)

    assert with_venv.status is CheckStatus.PASS, with_venv.details["output_excerpt"]
    assert with_venv.details["argv"][0] == str(venv / "bin" / "python")
    assert with_venv.details["counts"]["passed"] == 1
    assert not any(str(venv).startswith(h) for h in with_venv.details["hidden"])
    assert without.status is CheckStatus.FAIL  # the module is not in our interpreter
    assert "venvonly" in without.details["output_excerpt"]


def test_a_named_python_expands_python_and_puts_its_folder_first_on_path(
    app: GitRepo, venv: Path
) -> None:
    commit = app.commit({"test_dep.py": VENV_TEST})
    repository = RepositoryConfig("app", python=venv / "bin" / "python", results="exit-code")

    tests = check(app.path, commit, UNITTEST, 60, SANDBOX, repository=repository)
    tool = check(app.path, commit, ("venv-only-tool",), 60, SANDBOX, repository=repository)

    assert tests.status is CheckStatus.PASS, tests.details["output_excerpt"]
    assert tool.status is CheckStatus.PASS, tool.details["output_excerpt"]
    assert tool.details["executable"] == str(venv / "bin" / "venv-only-tool")
    assert "from the venv" in tool.details["output_excerpt"]


def test_a_named_interpreter_that_does_not_exist_is_runner_not_found(
    app: GitRepo, tmp_path: Path
) -> None:
    commit = app.commit({"test_calc.py": UT_PASSING})
    repository = RepositoryConfig("app", venv=tmp_path / "no-such-venv")

    result = check(app.path, commit, UNITTEST, 60, SANDBOX, repository=repository)

    assert result.status is CheckStatus.ERROR
    assert _codes(result) == ["tests.runner_not_found"]
    assert "no-such-venv" in result.findings[0].message


# configuration ---------------------------------------------------------------------------


def _load(tmp_path: Path, table: str) -> RepositoryConfig:
    path = tmp_path / "v.toml"
    path.write_text("[repositories.calc]\n" + table)
    return Config.load(path, environ={}).repository("calc")


def test_results_and_interpreter_keys_are_read(tmp_path: Path) -> None:
    junit = _load(tmp_path, 'results = { junit = ["reports/*.xml", "b/**/*.xml"] }\nvenv = "v"\n')
    exit_code = _load(tmp_path, 'results = "exit-code"\npython = "/opt/py/bin/python"\n')
    default = _load(tmp_path, "")

    assert (junit.results, junit.results_junit) == ("junit", ("reports/*.xml", "b/**/*.xml"))
    assert junit.venv == tmp_path / "v"
    assert (exit_code.results, exit_code.python) == ("exit-code", Path("/opt/py/bin/python"))
    assert (default.results, default.results_junit, default.python, default.venv) == (
        "auto",
        (),
        None,
        None,
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('results = "junit"\n', "repositories.calc.results: expected"),
        ("results = { junit = 'reports/*.xml' }\n", "repositories.calc.results.junit: expected"),
        ("results = { junit = [] }\n", "repositories.calc.results.junit: expected"),
        ("results = { junit = ['../x.xml'] }\n", "repositories.calc.results.junit: '../x.xml'"),
        ("results = { junit = ['/tmp/*.xml'] }\n", "repositories.calc.results.junit: '/tmp"),
        ("results = { junit = ['a'], xml = 1 }\n", "repositories.calc.results: expected"),
        ("python = 3\n", "repositories.calc.python"),
        ('python = "p"\nvenv = "v"\n', "repositories.calc: give python or venv"),
    ],
)
def test_bad_results_or_interpreter_keys_name_the_key(
    tmp_path: Path, table: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        _load(tmp_path, table)


# end to end: verify() hands the repository's configuration to the check ------------------


def test_verify_reads_the_configured_junit_results(repo: GitRepo) -> None:
    command = ("{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider")
    repo_cfg = RepositoryConfig(
        "calc",
        path=repo.path,
        test_command=(*command, "--junitxml=reports/junit.xml"),
        test_timeout_s=60,
        results="junit",
        results_junit=("reports/*.xml",),
    )
    report = parse_report(to_bytes(fixed_session(repo).report()))

    v = verify(report, Config(repositories={"calc": repo_cfg}), Options())

    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert v.checks["tests"].details["results"]["files"] == ["reports/junit.xml"]
    assert v.checks["tests"].details["counts"]["passed"] == 2


@pytest.mark.skipif(not runner.network_isolation_available(), reason="no sandbox here")
def test_the_sandbox_was_used_for_these_runs(app: GitRepo) -> None:
    commit = app.commit({"test_calc.py": UT_PASSING})

    result = check(app.path, commit, UNITTEST, 60, SANDBOX)

    assert result.details["network_isolated"] is True
    assert str(app.path) in result.details["hidden"]


def test_the_text_verdict_shows_an_uncounted_run_and_its_note(repo: GitRepo) -> None:
    repo_cfg = RepositoryConfig(
        "calc",
        path=repo.path,
        test_command=("{python}", "-c", "print('fine')"),
        test_timeout_s=60,
        results="exit-code",
    )
    report = parse_report(to_bytes(fixed_session(repo).report()))
    v = verify(report, Config(repositories={"calc": repo_cfg}), Options())
    text = render.verification_text(v, width=200)

    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert "tests not counted; exit 0" in text
    assert 'note: tests not counted: results = "exit-code"' in text


# -- our pytest entry's configuration and plugins (verifier/checks/tests/entries/pytest_entry.py)


def test_settings_round_trip_through_our_toml_writer() -> None:
    import tomllib

    from verifier.checks.tests.entries import pytest_entry

    values = {
        "addopts": '-p pytester -k "a and not b"',
        "markers": 'slow: long\nfast: \\ short "quoted"\t',
        "testpaths": ["tests", "more tests"],
        "xfail_strict": True,
        "timeout": 3,
        "ratio": 0.5,
        "nested": {"a": ["b"]},
    }
    text = "\n".join(
        f"{pytest_entry._toml(k)} = {pytest_entry._toml(v)}" for k, v in values.items()
    )

    assert tomllib.loads(text) == values


def test_the_plugins_asked_for_are_the_p_options_and_the_required_plugins() -> None:
    from verifier.checks.tests.entries import pytest_entry

    settings = {"addopts": "-p xdist -pno:warnings -p no:cacheprovider -ptests.plug -q",
                "required_plugins": ["pytest-mock>=3", "pytest_asyncio"]}  # fmt: skip

    assert pytest_entry._asked_for(settings, ["-p", "anyio", "-x"]) == [
        "xdist",
        "tests.plug",
        "anyio",
        "pytest-mock",
        "pytest_asyncio",
    ]


def test_the_commands_own_config_file_and_rootdir_are_taken_out_of_its_arguments() -> None:
    from verifier.checks.tests.entries import pytest_entry

    split = pytest_entry._split_command(
        ["-q", "-c", "ci.ini", "--rootdir=sub", "--confcutdir", ".", "--", "-c", "x"]
    )

    assert split == (["-q", "--confcutdir", ".", "--", "-c", "x"], "ci.ini", "sub", True)
    assert pytest_entry._split_command(["-cci.toml", "t"]) == (["t"], "ci.toml", None, False)


def test_a_distribution_in_the_copy_or_the_checked_repository_never_provides_a_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By location: the same metadata counts from a folder of the interpreter's, not from
    the copy nor from the checked repository (an editable install's path)."""
    from verifier.checks.tests.entries import pytest_entry

    site = tmp_path / "site"
    folder = site / "tree_plugin-0.1.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text("Metadata-Version: 2.1\nName: tree-plugin\nVersion: 0.1\n")
    (folder / "entry_points.txt").write_text("[pytest11]\ntreeplug = tree_plugin_mod\n")
    (site / "tree_plugin_mod.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "tree_plugin_mod", raising=False)

    assert pytest_entry._trusted_plugins(["treeplug"], str(tmp_path / "copy")) != []
    assert pytest_entry._trusted_plugins(["tree-plugin"], str(tmp_path / "copy")) != []
    assert pytest_entry._trusted_plugins(["treeplug"], str(tmp_path)) == []
    assert pytest_entry._trusted_plugins(["treeplug"], "/nowhere", [str(site)]) == []
    assert pytest_entry._trusted_plugins([], str(tmp_path / "copy")) == []
