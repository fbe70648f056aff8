"""Flaky tests told apart (issue 18): a failed test is run again, by its id, on a fresh copy.

Real sessions, real pytest runs in the sandbox. The flake is a real one: a test
that depends on the order the suite runs in fails in the whole run and passes
when run alone, as the rerun runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import BASE, CALC, PYTEST, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus, Verification
from verifier.verify import verify

FIXED = CALC.replace("subtract(a, b):\n    return a + b", "subtract(a, b):\n    return a - b")
ORDER = "tests/test_order.py::test_alone"
ALWAYS = "tests/test_always.py::test_never_passes"
# test_first leaves state behind that test_alone trips on: it passes only when run alone.
ORDER_TESTS = (
    "SEEN = []\n\n\ndef test_first():\n    SEEN.append(1)\n\n\n"
    "def test_alone():\n    assert not SEEN, 'ran after test_first'\n"
)
ALWAYS_TESTS = "def test_never_passes():\n    assert 1 == 2\n"


def repo_with(tmp_path: Path, tests: dict[str, str]) -> GitRepo:
    repo = GitRepo(tmp_path / "r")
    repo.commit({**BASE, "calc.py": FIXED, "NOTES.md": "# Notes\n", **tests}, "base")
    return repo


def verified(repo: GitRepo, **keys: Any) -> Verification:
    edit = call(
        "replace_lines",
        "n1",
        path="NOTES.md",
        start_line=1,
        end_line=1,
        expected="# Notes\n",
        replacement="# Notes\n\nchecked\n",
    )
    model = ScriptedModel([model_turn(edit), model_turn("Done.")])
    session = run_session(repo.path, "s-flaky", "Note it.", model, commit=True)
    cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60, **keys
    )
    return verify(parse_report(to_bytes(session.report())), Config(repositories={"calc": cfg}))


def test_a_test_that_fails_then_passes_is_flaky_and_never_delivered(tmp_path: Path) -> None:
    v = verified(repo_with(tmp_path, {"tests/test_order.py": ORDER_TESTS}))
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    tests = v.checks["tests"]
    assert tests.status is CheckStatus.ERROR
    (finding,) = tests.findings
    assert (finding.code, finding.path) == ("tests.flaky", ORDER)
    assert "failed, passed" in finding.message
    assert tests.details["attempts"] == {ORDER: ["failed", "passed"]}


def test_a_test_that_fails_at_every_attempt_is_a_failure(tmp_path: Path) -> None:
    v = verified(repo_with(tmp_path, {"tests/test_always.py": ALWAYS_TESTS}))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert [f.code for f in v.checks["tests"].findings] == ["tests.failed"]
    assert v.checks["tests"].details["attempts"] == {ALWAYS: ["failed", "failed", "failed"]}


def test_a_failure_beside_a_flake_is_still_a_failure(tmp_path: Path) -> None:
    v = verified(
        repo_with(
            tmp_path, {"tests/test_order.py": ORDER_TESTS, "tests/test_always.py": ALWAYS_TESTS}
        )
    )
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert [f.code for f in v.checks["tests"].findings] == ["tests.failed", "tests.flaky"]
    attempts = v.checks["tests"].details["attempts"]
    assert attempts[ORDER] == ["failed", "passed"]
    assert attempts[ALWAYS] == ["failed", "failed", "failed"]


def test_with_no_reruns_a_flaky_failure_fails_as_before(tmp_path: Path) -> None:
    v = verified(repo_with(tmp_path, {"tests/test_order.py": ORDER_TESTS}), flaky_reruns=0)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert v.checks["tests"].details["attempts"] == {ORDER: ["failed"]}


def test_a_known_flaky_test_is_reported_not_judged(tmp_path: Path) -> None:
    v = verified(repo_with(tmp_path, {"tests/test_order.py": ORDER_TESTS}), known_flaky=[ORDER])
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]["tests"]
    (note,) = [n for n in v.checks["tests"].notes if "known flaky" in n]
    assert ORDER in note


def test_a_known_flaky_test_does_not_excuse_another_failure(tmp_path: Path) -> None:
    repo = repo_with(
        tmp_path, {"tests/test_order.py": ORDER_TESTS, "tests/test_always.py": ALWAYS_TESTS}
    )
    v = verified(repo, known_flaky=[ORDER])
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert v.checks["tests"].details["attempts"] == {ALWAYS: ["failed", "failed", "failed"]}


@pytest.mark.parametrize("ids", [["", "x"], "tests/a.py::t", [" padded "]])
def test_known_flaky_must_be_a_list_of_test_ids(ids: Any) -> None:
    with pytest.raises(ValueError, match="known_flaky") as caught:
        RepositoryConfig("calc", known_flaky=ids)
    assert "test ids" in str(caught.value)
