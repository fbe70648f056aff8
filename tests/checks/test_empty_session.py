"""An empty session is not delivered (issue 18): done, no claim, and nothing changed.

Real sessions by the reference harness on real repositories whose tests pass at
the base: without this finding each would be delivered (no claim, nothing to
contradict, the tests green).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import BASE, CALC, FIX, PYTEST, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus, Verification
from verifier.tasks import Task
from verifier.verify import verify

FIXED = CALC.replace("subtract(a, b):\n    return a + b", "subtract(a, b):\n    return a - b")


@pytest.fixture
def green(tmp_path: Path) -> GitRepo:
    """A repository whose tests already pass at the base."""
    repo = GitRepo(tmp_path / "green")
    repo.commit({**BASE, "calc.py": FIXED, "NOTES.md": "# Notes\n"}, "base")
    return repo


def verified(repo: GitRepo, *turns: object, task: Task | None = None, **kw: object) -> Verification:
    model = ScriptedModel([*turns, model_turn("Done, fixed it.")])
    session = run_session(repo.path, "s-empty", "Fix subtract.", model, **kw)  # type: ignore[arg-type]
    cfg = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    return verify(
        parse_report(to_bytes(session.report())), Config(repositories={"calc": cfg}), task=task
    )


def codes(v: Verification, check: str) -> list[str]:
    return [f.code for f in v.checks[check].findings]


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "worktree"])
def test_a_done_session_that_changed_nothing_is_not_delivered(green: GitRepo, commit: bool) -> None:
    v = verified(green, commit=commit)
    assert v.done
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()["checks"]
    assert codes(v, "changes") == ["change.empty_session"]
    (finding,) = v.checks["changes"].findings
    assert finding.expected == "a change, or a task declared read-only"
    # Everything else holds: the tests pass, the trail is whole; emptiness alone decides.
    assert {n: r.status for n, r in v.checks.items() if n != "changes"} == {
        "tests": CheckStatus.PASS,
        "audit": CheckStatus.PASS,
        "replay": CheckStatus.PASS,
    }


def test_an_edit_the_tool_rejected_then_done_is_an_empty_session(green: GitRepo) -> None:
    """The issue's example: the harness refused the edit (its expected text is not there)."""
    stale = {**FIX, "expected": "    return a * b\n"}
    v = verified(green, model_turn(call("replace_lines", "c1", **stale)), commit=True)
    assert (green.path / "calc.py").read_text() == FIXED
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert codes(v, "changes") == ["change.empty_session"]


def test_a_read_only_task_that_changed_nothing_is_delivered(green: GitRepo) -> None:
    v = verified(green, commit=True, task=Task("review-1", read_only=True))
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]
    assert codes(v, "changes") == []


def test_a_task_that_is_not_read_only_does_not_excuse_an_empty_session(green: GitRepo) -> None:
    v = verified(
        green, commit=True, task=Task("fix-1", pass_to_pass=("tests/test_calc.py::test_add",))
    )
    assert codes(v, "changes") == ["change.empty_session"]


def test_a_session_that_did_not_say_done_is_not_called_empty(green: GitRepo) -> None:
    """An agent out of turns admits it did not finish: that is its status, not a false done."""
    model = ScriptedModel(
        [model_turn(call("read_file", f"c{i}", path="calc.py")) for i in range(5)]
    )
    session = run_session(green.path, "s-turns", "Fix.", model, max_turns=3, commit=True)
    cfg = RepositoryConfig("calc", path=green.path, test_command=tuple(PYTEST), test_timeout_s=60)
    v = verify(parse_report(to_bytes(session.report())), Config(repositories={"calc": cfg}))
    assert not v.done
    assert "change.empty_session" not in codes(v, "changes")


def test_a_real_change_on_a_green_base_is_delivered(green: GitRepo) -> None:
    """The honest side: the same repository, one real edit, delivered."""
    edit = call(
        "replace_lines",
        "c1",
        path="NOTES.md",
        start_line=1,
        end_line=1,
        expected="# Notes\n",
        replacement="# Notes\n\nsubtract() checked.\n",
    )
    v = verified(green, model_turn(edit), commit=True)
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]
