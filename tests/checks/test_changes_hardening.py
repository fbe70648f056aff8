"""The changes check cannot be steered by the repository it checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.support.gitrepo import GitRepo, sha256
from tests.support.sessions import CALC
from verifier.checks.base import HeadState
from verifier.checks.changes import check
from verifier.checks.tests import check as tests_module
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import ClaimedChange
from verifier.findings import CheckResult, CheckStatus

CFG = RepositoryConfig("calc")
FIXED = CALC.replace("subtract(a, b):\n    return a + b", "subtract(a, b):\n    return a - b")


def modify(path: str, before: str, after: str) -> ClaimedChange:
    return ClaimedChange(
        path=path,
        action="modify",
        sha256_before=sha256(before.encode()),
        sha256_after=sha256(after.encode()),
    )


def codes(result: CheckResult) -> list[str]:
    return [f.code for f in result.findings]


def test_repository_config_cannot_run_programs(repo: GitRepo, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\nenv > {marker}\n")
    hook.chmod(0o755)
    repo.write({".gitattributes": "*.py filter=evil\n"})
    base = repo.commit(msg="attributes")
    repo.write({"calc.py": FIXED})
    os.utime(repo.path / "tests" / "test_calc.py", (1, 1))  # stale stat: git would re-read it
    # Set last: our own git commands above would have run them.
    repo.git("config", "core.fsmonitor", str(hook))
    repo.git("config", "filter.evil.clean", f"sh -c 'env > {marker}; cat'")
    result = check(repo.path, base, None, [modify("calc.py", CALC, FIXED)], CFG)
    assert result.status is CheckStatus.PASS, result.findings
    assert not marker.exists()


def test_assume_unchanged_cannot_hide_an_edit(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"tests/test_calc.py": "def test_subtract():\n    assert True\n"})
    repo.git("update-index", "--assume-unchanged", "tests/test_calc.py")
    repo.write({"calc.py": FIXED})
    repo.git("update-index", "--skip-worktree", "calc.py")
    result = check(repo.path, base, None, [], CFG)
    assert sorted(f.path or "" for f in result.findings) == ["calc.py", "tests/test_calc.py"]
    assert set(codes(result)) == {"change.undeclared"}


def test_replace_refs_do_not_change_the_commit_checked(repo: GitRepo) -> None:
    base = repo.head()
    bad = repo.commit({"calc.py": FIXED.replace("a - b", "a * b")}, "really bad")
    repo.git("checkout", "-q", "--detach", base)
    good = repo.commit({"calc.py": FIXED}, "good")
    repo.git("replace", bad, good)
    result = check(repo.path, base, bad, [modify("calc.py", CALC, FIXED)], CFG)
    assert codes(result) == ["change.hash_mismatch"]


def test_a_ref_named_like_a_hash_is_not_taken_for_the_commit(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    repo.git("branch", "deadbeef", head)
    result = check(repo.path, base, "deadbeef", [modify("calc.py", CALC, FIXED)], CFG)
    assert codes(result) == ["change.head_missing"]


def test_a_ref_named_like_a_full_length_hash_is_not_taken_for_the_commit(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    for name in ("a" * 40, "b" * 64):  # full SHA-1 and SHA-256 lengths, in a SHA-1 repository
        repo.git("branch", name, head)
        result = check(repo.path, base, name, [modify("calc.py", CALC, FIXED)], CFG)
        assert codes(result) == ["change.head_missing"], name


def test_an_abbreviated_head_hash_is_resolved(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    result = check(repo.path, base, head[:12], [modify("calc.py", CALC, FIXED)], CFG)
    assert result.status is CheckStatus.PASS, result.findings


def test_claims_inside_dot_git_are_refused(repo: GitRepo) -> None:
    base = repo.head()
    for path in (".git/hooks/post-checkout", "sub/.GIT/config", ".git"):
        claim = ClaimedChange(
            path=path, action="create", sha256_before=None, sha256_after=sha256(b"x")
        )
        result = check(repo.path, base, None, [claim], CFG)
        assert codes(result) == ["change.path_unsafe"], path


def test_a_claimed_file_git_ignores_is_not_delivered(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"build/out.txt": "generated\n"})
    claim = ClaimedChange(
        path="build/out.txt",
        action="create",
        sha256_before=None,
        sha256_after=sha256(b"generated\n"),
    )
    result = check(repo.path, base, None, [claim], CFG)
    assert codes(result) == ["change.ignored"]


def test_non_utf8_file_names_are_reported_readably(repo: GitRepo) -> None:
    base = repo.head()
    (repo.path / os.fsdecode(b"bad\xff.txt")).write_bytes(b"x")
    result = check(repo.path, base, None, [], CFG)
    assert codes(result) == ["change.undeclared"]
    path = result.findings[0].path or ""
    json.dumps(result.to_dict()).encode("utf-8")  # printable and storable
    assert path == "bad\\xff.txt"


def test_git_environment_of_the_caller_is_not_inherited(repo: GitRepo, tmp_path: Path) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    env = {**os.environ, "GIT_DIR": str(tmp_path / "elsewhere"), "GIT_INDEX_FILE": "/nonexistent"}
    code = (
        "import sys; from pathlib import Path; from verifier.checks.changes import check;"
        "from verifier.config import RepositoryConfig;"
        f"r = check(Path({str(repo.path)!r}), {base!r}, {head!r}, [], RepositoryConfig('c'));"
        "print([f.code for f in r.findings])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "['change.undeclared']"


def test_a_name_too_long_to_open_is_a_finding_not_a_crash(repo: GitRepo) -> None:
    base = repo.head()
    claim = ClaimedChange(
        path="x" * 300 + ".py", action="create", sha256_before=None, sha256_after=sha256(b"x")
    )
    result = check(repo.path, base, None, [claim], CFG)
    assert codes(result) == ["change.unreadable"]
    assert "too long" in result.findings[0].message


def test_worktree_hashes_are_handed_on_for_the_tests(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"calc.py": FIXED})
    result = check(repo.path, base, None, [modify("calc.py", CALC, FIXED)], CFG)
    (state,) = result.facts
    assert isinstance(state, HeadState) and state.mode == "worktree"
    assert state.files["calc.py"] == "100644 " + sha256(FIXED.encode())
    assert "tests/test_calc.py" in state.files


def test_a_base_outside_the_trusted_history_fails(repo: GitRepo) -> None:
    trusted = repo.head()
    repo.git("update-ref", "refs/remotes/origin/main", trusted)
    # The agent's own commit weakens the tests, then names it as the base.
    weakened = repo.commit({"tests/test_calc.py": "def test_subtract():\n    assert True\n"})
    cfg = RepositoryConfig("calc", trusted_ref="refs/remotes/origin/main")
    result = check(repo.path, weakened, weakened, [], cfg)
    assert codes(result) == ["change.base_untrusted"]
    assert result.status is CheckStatus.FAIL
    assert codes(check(repo.path, trusted, weakened, [], cfg)) == ["change.undeclared"]


def test_a_trusted_ref_that_is_missing_is_inconclusive(repo: GitRepo) -> None:
    cfg = RepositoryConfig("calc", trusted_ref="refs/remotes/origin/nope")
    result = check(repo.path, repo.head(), repo.head(), [], cfg)
    assert result.status is CheckStatus.ERROR
    assert codes(result) == ["change.trusted_ref_missing"]


def test_git_failing_half_way_is_inconclusive_not_a_crash(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    blob = repo.git("rev-parse", f"{head}:calc.py")
    (repo.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # a corrupt repository
    result = check(repo.path, base, head, [modify("calc.py", CALC, FIXED)], CFG)
    assert result.status is CheckStatus.ERROR
    assert codes(result) == ["change.git_failed"]


def test_claims_in_bulk_are_hashed_in_parallel_batches(repo: GitRepo) -> None:
    """Enough claims to split the blob reads between git processes; every hash checked."""
    files = {f"pkg/m{i:03}.py": f"x = {i}\n" for i in range(80)}
    base = repo.head()
    head = repo.commit(files)
    claims = [
        ClaimedChange(path=p, action="create", sha256_before=None, sha256_after=sha256(c.encode()))
        for p, c in files.items()
    ]
    assert check(repo.path, base, head, claims, CFG).status is CheckStatus.PASS
    claims[57] = ClaimedChange(
        path="pkg/m057.py", action="create", sha256_before=None, sha256_after=sha256(b"other")
    )
    result = check(repo.path, base, head, claims, CFG)
    assert codes(result) == ["change.hash_mismatch"]
    assert result.findings[0].path == "pkg/m057.py"


def _worktree_then_tests(
    repo: GitRepo, base: str, claims: list[ClaimedChange], between: Callable[[], object]
) -> tuple[CheckResult, CheckResult]:
    """The changes check, then `between` (a leftover process), then the tests, as verify() does."""
    changes = check(repo.path, base, None, claims, CFG)
    (state,) = changes.facts
    assert isinstance(state, HeadState)
    between()
    config = Config(network_isolation="off")
    command = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    tests = tests_module.check(repo.path, None, command, 60, config, expected_files=state.files)
    return changes, tests


def test_a_symlink_flipped_before_the_copy_is_never_delivered(repo: GitRepo) -> None:
    repo.write(
        {
            "expected_good.txt": "5\n",
            "expected_bad.txt": "8\n",
            "tests/test_data.py": (
                "from pathlib import Path\n\n\ndef test_data():\n"
                "    assert Path('expected.txt').read_text() == '5\\n'\n"
            ),
        }
    )
    os.symlink("expected_bad.txt", repo.path / "expected.txt")
    base = repo.commit(msg="data through a link")
    os.remove(repo.path / "expected.txt")
    os.symlink("expected_good.txt", repo.path / "expected.txt")

    def flip() -> None:  # back to the failing target, after the changes check read it
        os.remove(repo.path / "expected.txt")
        os.symlink("expected_bad.txt", repo.path / "expected.txt")

    claim = ClaimedChange(
        path="calc.py", action="modify", sha256_before=sha256(CALC.encode()),
        sha256_after=sha256(FIXED.encode()),
    )  # fmt: skip
    repo.write({"calc.py": FIXED})
    changes, tests = _worktree_then_tests(repo, base, [claim], flip)
    assert codes(changes) == ["change.undeclared"]  # the link's new target was not claimed
    assert tests.status is CheckStatus.ERROR
    assert codes(tests) == ["tests.head_moved"]
    assert "expected.txt" in tests.findings[0].message


def test_a_mode_flipped_before_the_copy_is_seen(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"calc.py": FIXED})
    _, tests = _worktree_then_tests(
        repo, base, [modify("calc.py", CALC, FIXED)], lambda: (repo.path / "calc.py").chmod(0o755)
    )
    assert codes(tests) == ["tests.head_moved"]


def test_an_uncommitted_session_that_creates_a_file_is_delivered(repo: GitRepo) -> None:
    base = repo.head()
    helper = "def double(x):\n    return 2 * x\n"
    repo.write({"calc.py": FIXED, "helper.py": helper})
    created = ClaimedChange(
        path="helper.py", action="create", sha256_before=None, sha256_after=sha256(helper.encode())
    )
    changes, tests = _worktree_then_tests(
        repo, base, [modify("calc.py", CALC, FIXED), created], lambda: None
    )
    assert changes.status is CheckStatus.PASS, changes.findings
    assert tests.status is CheckStatus.PASS, tests.findings
