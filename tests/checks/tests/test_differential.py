"""Differential runs and acceptance tests (issue 18): the base is tested too, each test classified.

Real repositories, real sessions by the reference harness, real pytest runs in
the sandbox, at the base and at the head. The base has a bug in subtract() that
`tests/test_calc.py::test_subtract` shows, and, in some repositories, a test that
fails before and after any session (`tests/test_legacy.py::test_legacy`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import BASE, FIX, PYTEST, fix_turns, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus, Verification
from verifier.store import Store
from verifier.store.cache import TestResults
from verifier.tasks import Task
from verifier.verify import verify

ADD = "tests/test_calc.py::test_add"
SUBTRACT = "tests/test_calc.py::test_subtract"
LEGACY = "tests/test_legacy.py::test_legacy"
LEGACY_TEST = "import calc\n\n\ndef test_legacy():\n    assert calc.multiply(2, 3) == 6\n"


@pytest.fixture
def legacy(tmp_path: Path) -> GitRepo:
    """The calc repository with a pre-existing failure beside the bug to fix."""
    repo = GitRepo(tmp_path / "legacy")
    repo.commit({**BASE, "tests/test_legacy.py": LEGACY_TEST, "NOTES.md": "# Notes\n"}, "base")
    return repo


@pytest.fixture
def calc(tmp_path: Path) -> GitRepo:
    """The calc repository: only test_subtract fails at the base."""
    repo = GitRepo(tmp_path / "calc")
    repo.commit({**BASE, "NOTES.md": "# Notes\n"}, "base")
    return repo


def notes_edit(cid: str = "n1") -> Any:
    return call(
        "replace_lines",
        cid,
        path="NOTES.md",
        start_line=1,
        end_line=1,
        expected="# Notes\n",
        replacement="# Notes\n\nlooked at subtract()\n",
    )


BREAK_ADD = call(
    "replace_lines",
    "b1",
    path="calc.py",
    start_line=2,
    end_line=2,
    expected="    return a + b\n",
    replacement="    return a * b\n",
)


def session(repo: GitRepo, sid: str, turns: list[Any]) -> bytes:
    model = ScriptedModel([*turns, model_turn("Done.")])
    return to_bytes(run_session(repo.path, sid, "Fix subtract.", model, commit=True).report())


def fixing(repo: GitRepo, sid: str = "s-fix") -> bytes:
    return session(repo, sid, fix_turns()[:2])


def verified(
    repo: GitRepo,
    report: bytes,
    *,
    task: Task | None = None,
    trusted: bool = True,
    test_cache: Any = None,
    **keys: Any,
) -> Verification:
    cfg = RepositoryConfig(
        "calc",
        path=repo.path,
        test_command=tuple(PYTEST),
        test_timeout_s=60,
        trusted_ref="refs/heads/main" if trusted else None,
        **keys,
    )
    before = repo.snapshot()
    v = verify(
        parse_report(report), Config(repositories={"calc": cfg}), task=task, test_cache=test_cache
    )
    assert repo.snapshot() == before, "verify modified the repository"
    return v


def codes(v: Verification) -> list[str]:
    return [f.code for f in v.checks["tests"].findings]


def classification(v: Verification) -> dict[str, Any]:
    found: dict[str, Any] = v.checks["tests"].details["classification"]
    return found


# -- pre-existing failures -----------------------------------------------------------------


def test_a_pre_existing_failure_under_differential_on_a_trusted_base_is_delivered(
    legacy: GitRepo,
) -> None:
    v = verified(legacy, fixing(legacy), baseline="differential")
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]["tests"]
    found = classification(v)
    assert found["counts"] == {
        "fixed": 1,
        "broken": 0,
        "still_failing": 1,
        "still_passing": 1,
        "new": 0,
        "removed": 0,
    }
    assert found["tests"]["fixed"] == [SUBTRACT]
    assert found["tests"]["still_failing"] == [LEGACY]
    (note,) = [n for n in v.checks["tests"].notes if "still failing" in n]
    assert LEGACY in note


def test_the_same_session_under_the_default_head_policy_is_not_delivered(legacy: GitRepo) -> None:
    v = verified(legacy, fixing(legacy))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert codes(v) == ["tests.failed"]
    assert "classification" not in v.checks["tests"].details
    # The failed test was run again, and failed again: a failure, not a flake.
    assert v.checks["tests"].details["attempts"] == {LEGACY: ["failed", "failed", "failed"]}


def test_a_pre_existing_failure_on_a_base_no_trusted_ref_vouches_for_is_not_excused(
    legacy: GitRepo,
) -> None:
    """Else a report could pick a base where every test fails and have nothing judged."""
    v = verified(legacy, fixing(legacy), baseline="differential", trusted=False)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert codes(v) == ["tests.failed"]
    assert classification(v)["tests"]["still_failing"] == [LEGACY]
    assert any("trusted_ref" in n for n in v.checks["tests"].notes)


def test_a_regression_is_not_delivered_and_names_the_broken_test(legacy: GitRepo) -> None:
    report = session(legacy, "s-regress", [*fix_turns()[:2], model_turn(BREAK_ADD)])
    v = verified(legacy, report, baseline="differential")
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    first = v.checks["tests"].findings[0]
    assert (first.code, first.path) == ("tests.broken", ADD)
    assert first.found == "failed"
    assert classification(v)["tests"]["broken"] == [ADD]
    # The pre-existing failure is still only a note: the regression decides.
    assert classification(v)["tests"]["still_failing"] == [LEGACY]


# -- acceptance tests ------------------------------------------------------------------------


def test_an_acceptance_test_fixed_is_delivered_and_the_base_was_run(calc: GitRepo) -> None:
    """The task's acceptance tests make the run differential under the default policy."""
    v = verified(calc, fixing(calc), task=Task("fix-sub", fail_to_pass=(SUBTRACT,)))
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]["tests"]
    assert classification(v)["tests"]["fixed"] == [SUBTRACT]
    assert classification(v)["base"]["status"] == "fail"


def test_an_acceptance_test_not_fixed_is_not_delivered_and_named(calc: GitRepo) -> None:
    report = session(calc, "s-notes", [model_turn(notes_edit())])
    v = verified(calc, report, task=Task("fix-sub", fail_to_pass=(SUBTRACT,)))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    first = v.checks["tests"].findings[0]
    assert (first.code, first.path, first.found) == (
        "tests.acceptance_not_fixed",
        SUBTRACT,
        "failed at the head",
    )


def test_an_acceptance_test_that_passes_at_the_base_leaves_the_verdict_open(calc: GitRepo) -> None:
    """SWE-bench's issue 24: a task whose acceptance test already passes proves nothing."""
    v = verified(calc, fixing(calc), task=Task("broken-task", fail_to_pass=(ADD,)))
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    (finding,) = v.checks["tests"].findings
    assert (finding.code, finding.path) == ("tests.acceptance_passes_at_base", ADD)


def test_an_acceptance_test_that_never_ran_leaves_the_verdict_open(calc: GitRepo) -> None:
    missing = "tests/test_calc.py::test_divide"
    v = verified(calc, fixing(calc), task=Task("typo", fail_to_pass=(missing,)))
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    (finding,) = v.checks["tests"].findings
    assert (finding.code, finding.path) == ("tests.acceptance_missing", missing)


def test_a_must_keep_test_that_fails_at_the_head_is_not_delivered(calc: GitRepo) -> None:
    report = session(calc, "s-regress", [*fix_turns()[:2], model_turn(BREAK_ADD)])
    v = verified(calc, report, task=Task("keep-add", pass_to_pass=(ADD,)))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    broken = [f for f in v.checks["tests"].findings if f.code == "tests.broken"]
    assert [f.path for f in broken] == [ADD]


def test_a_must_keep_test_that_passes_is_delivered(calc: GitRepo) -> None:
    v = verified(calc, fixing(calc), task=Task("keep-add", pass_to_pass=(ADD,)))
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]["tests"]


# -- the base, tested once per tree ----------------------------------------------------------


def test_the_base_is_tested_once_for_the_sessions_on_it(calc: GitRepo, tmp_path: Path) -> None:
    task = Task("fix-sub", fail_to_pass=(SUBTRACT,))
    with Store.open(f"sqlite:///{tmp_path / 'cache.sqlite3'}") as store:
        cache = TestResults(store)
        first = verified(calc, fixing(calc, "s-one"), task=task, test_cache=cache)
        calc.git("reset", "-q", "--hard", "HEAD~1")  # the second session starts from the base
        again = session(calc, "s-two", [*fix_turns()[:2], model_turn(notes_edit())])
        second = verified(calc, again, task=task, test_cache=cache)
    assert first.delivery_status is second.delivery_status is DeliveryStatus.DELIVERED
    assert classification(first)["base"]["cached_from"] is None
    assert classification(second)["base"]["cached_from"] == "s-one"
    assert classification(second)["tests"]["fixed"] == [SUBTRACT]


def test_without_a_store_the_base_is_kept_in_memory_for_this_process(
    calc: GitRepo, tmp_path: Path
) -> None:
    # A base tree of its own: the same tree tested by another test here would answer too.
    calc.commit({"NOTES.md": f"# Notes\n\n{tmp_path}\n"}, "a base of its own")
    task = Task("fix-sub", fail_to_pass=(SUBTRACT,))
    verified(calc, fixing(calc, "s-mem-1"), task=task)
    calc.git("reset", "-q", "--hard", "HEAD~1")
    second = verified(
        calc, session(calc, "s-mem-2", [*fix_turns()[:2], model_turn(notes_edit())]), task=task
    )
    assert classification(second)["base"]["cached_from"] == "s-mem-1"


def test_the_fix_itself_is_what_the_classification_credits(calc: GitRepo) -> None:
    """The same task, a session whose replacement is wrong: not fixed, whatever else it did."""
    wrong = {**FIX, "replacement": "    return b - a\n"}
    report = session(calc, "s-wrong", [model_turn(call("replace_lines", "w1", **wrong))])
    v = verified(calc, report, task=Task("fix-sub", fail_to_pass=(SUBTRACT,)))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert v.checks["tests"].status is CheckStatus.FAIL
    assert "tests.acceptance_not_fixed" in codes(v)
    assert classification(v)["tests"]["still_failing"] == [SUBTRACT]


def test_a_runner_that_does_not_report_each_test_cannot_be_classified(tmp_path: Path) -> None:
    """unittest's counts say how many failed, not which: the base cannot be compared."""
    repo = GitRepo(tmp_path / "ut")
    repo.commit({**BASE, "NOTES.md": "# Notes\n"}, "base")
    unittest = ("{python}", "-m", "unittest", "discover", "-s", "tests", "-t", ".")
    repo.commit({"tests/__init__.py": "", "tests/test_calc.py": UNITTEST_CALC}, "unittest")
    cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=unittest, test_timeout_s=60, baseline="differential"
    )
    v = verify(parse_report(fixing(repo)), Config(repositories={"calc": cfg}))
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE, v.to_dict()["checks"]["tests"]
    (finding,) = v.checks["tests"].findings
    assert finding.code == "tests.base_run_failed"
    assert "one by one" in finding.message


UNITTEST_CALC = (
    "import unittest\n\nfrom calc import add, subtract\n\n\n"
    "class CalcTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_subtract(self):\n        self.assertEqual(subtract(5, 3), 2)\n"
)


def test_sessions_verified_at_once_on_one_base_test_it_once(tmp_path: Path) -> None:
    """Six sessions on two bases, verified three at a time: two base runs, not six.

    The suite counts its own runs in a file outside the copy (no sandbox, so it can),
    a line per run naming the tree it ran on (the bug fixed or not).
    """
    runs = tmp_path / "runs.log"
    counter = (
        "\n\ndef test_count_the_run():\n"
        "    import calc\n"
        f"    with open({str(runs)!r}, 'a') as fh:\n"
        "        fh.write(('head' if calc.subtract(5, 3) == 2 else 'base') + '\\n')\n"
    )
    reports: list[bytes] = []
    repos: list[GitRepo] = []
    for name in ("one", "two"):
        repo = GitRepo(tmp_path / name)
        tests = {"tests/test_calc.py": BASE["tests/test_calc.py"] + counter}
        repo.commit({**BASE, **tests, "NOTES.md": f"# Notes {name} {tmp_path}\n"}, "base")
        base = repo.head()
        for i in range(3):
            repo.git("reset", "-q", "--hard", base)
            reports.append(session(repo, f"s-{name}-{i}", fix_turns()[:2]))
            repos.append(repo)
    task = Task("fix-sub", fail_to_pass=(SUBTRACT,))

    def one(i: int) -> Verification:
        cfg = RepositoryConfig(
            "calc",
            path=repos[i].path,
            test_command=tuple(PYTEST),
            test_timeout_s=60,
        )
        config = Config(repositories={"calc": cfg}, network_isolation="off")
        return verify(parse_report(reports[i]), config, task=task)

    with ThreadPoolExecutor(3) as pool:
        verdicts = list(pool.map(one, range(len(reports))))
    assert {v.delivery_status for v in verdicts} == {DeliveryStatus.DELIVERED}
    lines = runs.read_text().split()
    assert lines.count("base") == 2, lines
    assert lines.count("head") == 6, lines
    first = {classification(v)["base"]["cached_from"] for v in verdicts}
    assert None in first and len(first - {None}) == 2  # one base run each, reused by the rest


JUNIT_RUNNER = """import calc
import os

cases = {"test_add": calc.add(2, 3) == 5, "test_subtract": calc.subtract(5, 3) == 2}
os.makedirs("reports", exist_ok=True)
with open("reports/junit.xml", "w") as fh:
    fh.write("<testsuite>")
    for name, ok in cases.items():
        inner = "" if ok else "<failure message='wrong'/>"
        fh.write(f"<testcase classname='calc.CalcTest' name='{name}'>{inner}</testcase>")
    fh.write("</testsuite>")
raise SystemExit(0 if all(cases.values()) else 1)
"""


def test_junit_reports_are_classified_by_classname_dot_name(tmp_path: Path) -> None:
    """A runner of the repository's own that writes JUnit XML: its ids are JUnit's."""
    repo = GitRepo(tmp_path / "junit")
    repo.commit({**BASE, "run_tests.py": JUNIT_RUNNER, "NOTES.md": "# Notes\n"}, "base")
    cfg = RepositoryConfig(
        "calc",
        path=repo.path,
        test_command=("{python}", "run_tests.py"),
        test_timeout_s=60,
        results="junit",
        results_junit=("reports/*.xml",),
    )
    task = Task("fix-sub", fail_to_pass=("calc.CalcTest.test_subtract",))
    fixed = verify(parse_report(fixing(repo)), Config(repositories={"calc": cfg}), task=task)
    assert fixed.delivery_status is DeliveryStatus.DELIVERED, fixed.to_dict()["checks"]["tests"]
    assert classification(fixed)["tests"]["fixed"] == ["calc.CalcTest.test_subtract"]
    repo.git("reset", "-q", "--hard", "HEAD~1")
    notes = session(repo, "s-junit-notes", [model_turn(notes_edit())])
    left = verify(parse_report(notes), Config(repositories={"calc": cfg}), task=task)
    assert left.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert "tests.acceptance_not_fixed" in codes(left)
