"""The changed files scanned after a pass (`verifier.checks.tests.changed`), read from real
repositories as the changes check saw them."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from verifier.checks.base import HeadState
from verifier.checks.tests import changed
from verifier.checks.tests.testinfra import BaseInfra
from verifier.findings import CheckResult, CheckStatus

PATCHING = (
    "import _pytest.python\n\n\ndef add(a, b):\n    return a - b\n\n\n"
    "_pytest.python.Function.runtest = lambda self: None\n"
)
HONEST = "def add(a, b):\n    return a + b\n"
PASSED = CheckResult("tests", CheckStatus.PASS, details={"exit_code": 0}, duration_s=1.0)


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "r")


def committed(repo: GitRepo, calc: str) -> HeadState:
    base = repo.commit({"calc.py": "def add(a, b):\n    return 0\n"})
    head = repo.commit({"calc.py": calc})
    blob = repo.git("rev-parse", f"{head}:calc.py")
    return HeadState("commit", base, head, changed=("calc.py",), changed_blobs={"calc.py": blob})


def worktree(repo: GitRepo, calc: str) -> HeadState:
    base = repo.commit({"calc.py": "def add(a, b):\n    return 0\n"})
    repo.write({"calc.py": calc})
    digest = hashlib.sha256(calc.encode()).hexdigest()
    return HeadState(
        "worktree", base, None, files={"calc.py": f"100644 {digest}"}, changed=("calc.py",)
    )


@pytest.mark.parametrize("state", [committed, worktree], ids=["commit", "worktree"])
def test_a_changed_file_patching_the_runner_makes_a_pass_inconclusive(
    repo: GitRepo, state: Callable[[GitRepo, str], HeadState]
) -> None:
    result = changed.scan(repo.path, state(repo, PATCHING), PASSED)

    assert result.status is CheckStatus.ERROR
    assert {f.code for f in result.findings} == {"tests.tampering_suspected"}
    assert {f.path for f in result.findings} == {"calc.py"}
    assert result.details == PASSED.details
    assert result.duration_s >= PASSED.duration_s


@pytest.mark.parametrize("state", [committed, worktree], ids=["commit", "worktree"])
def test_an_honest_change_leaves_the_pass_as_it_was(
    repo: GitRepo, state: Callable[[GitRepo, str], HeadState]
) -> None:
    result = changed.scan(repo.path, state(repo, HONEST), PASSED)

    assert (result.status, result.findings, result.notes) == (CheckStatus.PASS, (), ())


def test_a_working_tree_changed_since_the_changes_check_is_head_moved(repo: GitRepo) -> None:
    head = worktree(repo, HONEST)
    repo.write({"calc.py": PATCHING})  # after the changes check hashed it

    result = changed.scan(repo.path, head, PASSED)

    assert result.status is CheckStatus.ERROR
    assert [f.code for f in result.findings] == ["tests.head_moved"]
    assert "'calc.py'" in result.findings[0].message


def test_a_link_in_place_of_a_changed_file_is_not_followed(repo: GitRepo, tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text(PATCHING)
    head = worktree(repo, HONEST)
    (repo.path / "calc.py").unlink()
    os.symlink(outside, repo.path / "calc.py")

    result = changed.scan(repo.path, head, PASSED)

    assert (result.status, result.findings) == (CheckStatus.PASS, ())


def test_a_blob_git_cannot_read_is_a_snapshot_error(repo: GitRepo) -> None:
    head = committed(repo, HONEST)
    missing = HeadState(
        "commit", head.base_commit, head.head_commit, changed=("calc.py",),
        changed_blobs={"calc.py": "0" * 40},
    )  # fmt: skip

    result = changed.scan(repo.path, missing, PASSED)

    assert result.status is CheckStatus.ERROR
    assert [f.code for f in result.findings] == ["tests.snapshot_failed"]
    assert result.findings[0].message.startswith("the changed files: ")


IMPORTER = (
    "import sys\n\n\ndef load(name, mod):\n    sys.modules[name] = mod\n    return mod\n\n\n"
    "def add(a, b):\n    return 0\n"
)


def importer_states(repo: GitRepo, head_text: str, mode: str) -> HeadState:
    """A change to a module that wrote sys.modules at the base, as the changes check
    describes it (with the base's blob of the changed file)."""
    base = repo.commit({"calc.py": IMPORTER, "tests/test_calc.py": "def test(): pass\n"})
    base_blob = repo.git("rev-parse", f"{base}:calc.py")
    if mode == "worktree":
        repo.write({"calc.py": head_text})
        digest = hashlib.sha256(head_text.encode()).hexdigest()
        return HeadState(
            "worktree", base, None, files={"calc.py": f"100644 {digest}"}, changed=("calc.py",),
            base_blobs={"calc.py": base_blob},
        )  # fmt: skip
    head = repo.commit({"calc.py": head_text})
    blob = repo.git("rev-parse", f"{head}:calc.py")
    return HeadState(
        "commit", base, head, changed=("calc.py",), changed_blobs={"calc.py": blob},
        base_blobs={"calc.py": base_blob},
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["commit", "worktree"])
def test_lines_the_base_already_had_are_not_reported(repo: GitRepo, mode: str) -> None:
    fixed = IMPORTER.replace("return 0", "return a + b")
    result = changed.scan(repo.path, importer_states(repo, fixed, mode), PASSED)
    assert (result.status, result.findings) == (CheckStatus.PASS, ())


@pytest.mark.parametrize("mode", ["commit", "worktree"])
def test_a_new_line_in_that_file_is_reported(repo: GitRepo, mode: str) -> None:
    worse = IMPORTER.replace("return 0", "sys.modules.pop('_pytest.python')\n    return a + b")
    result = changed.scan(repo.path, importer_states(repo, worse, mode), PASSED)
    assert result.status is CheckStatus.ERROR
    assert [f.found for f in result.findings] == [
        "sys-modules-surgery at line 10: sys.modules.pop('_pytest.python')"
    ]


def test_what_the_run_took_from_the_base_is_skipped_and_the_rest_is_code_under_test(
    repo: GitRepo,
) -> None:
    patching = "import _pytest\n"
    base = repo.commit({"calc.py": "X = 1\n"})
    head = repo.commit({"tests/test_x.py": patching, "testing/helper.py": patching})
    blobs = {
        p: repo.git("rev-parse", f"{head}:{p}") for p in ("tests/test_x.py", "testing/helper.py")
    }
    state = HeadState("commit", base, head, changed=tuple(sorted(blobs)), changed_blobs=blobs)
    infra = BaseInfra((), frozenset({"tests/test_x.py"}))

    result = changed.scan(repo.path, state, PASSED, infra)
    assert [f.path for f in result.findings] == ["testing/helper.py"]
    # Nothing taken from the base (test_infra_from_base = false): test_paths are tests.
    result = changed.scan(repo.path, state, PASSED, None, ("tests/**",))
    assert [f.path for f in result.findings] == ["testing/helper.py"]
    result = changed.scan(repo.path, state, PASSED, None, ("tests/**", "testing/**"))
    assert (result.status, result.findings) == (CheckStatus.PASS, ())
