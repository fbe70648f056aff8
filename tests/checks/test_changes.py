"""The changes check against real repositories."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo, sha256
from tests.support.sessions import CALC
from verifier._internal.paths import glob_matches
from verifier.checks.changes import MemoryDigestCache, check
from verifier.config import RepositoryConfig
from verifier.contract.report import ClaimedChange
from verifier.findings import CheckResult, CheckStatus

FIXED = CALC.replace(
    "def subtract(a, b):\n    return a + b", "def subtract(a, b):\n    return a - b"
)
CFG = RepositoryConfig("calc")


def claim(path: str, before: str | bytes | None, after: str | bytes | None) -> ClaimedChange:
    def h(v: str | bytes | None) -> str | None:
        return None if v is None else sha256(v.encode() if isinstance(v, str) else v)

    action = "create" if before is None else "delete" if after is None else "modify"
    return ClaimedChange(path=path, action=action, sha256_before=h(before), sha256_after=h(after))


def run(
    repo: GitRepo, base: str, head: str | None, *claims: ClaimedChange, cfg: RepositoryConfig = CFG
) -> CheckResult:
    before = repo.snapshot()
    result = check(repo.path, base, head, list(claims), cfg)
    assert repo.snapshot() == before, "the check modified the repository"
    return result


def codes(result: CheckResult) -> list[str]:
    return [f.code for f in result.findings]


def test_committed_change_with_right_hashes_passes(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    result = run(repo, base, head, claim("calc.py", CALC, FIXED))
    assert result.status is CheckStatus.PASS, result.findings
    assert result.details["mode"] == "commit"


def test_uncommitted_change_passes_in_worktree_mode(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"calc.py": FIXED, "new.txt": "n\n"})
    result = run(repo, base, None, claim("calc.py", CALC, FIXED), claim("new.txt", None, "n\n"))
    assert result.status is CheckStatus.PASS, result.findings
    assert result.details["mode"] == "worktree"


def test_missing_head_commit_fails(repo: GitRepo) -> None:
    result = run(repo, repo.head(), "ab" * 20, claim("calc.py", CALC, FIXED))
    assert result.status is CheckStatus.FAIL
    assert codes(result) == ["change.head_missing"]


def test_missing_base_commit_is_inconclusive(repo: GitRepo) -> None:
    result = run(repo, "cd" * 20, None)
    assert result.status is CheckStatus.ERROR
    assert codes(result) == ["change.base_missing"]


def test_missing_repository_is_inconclusive(tmp_path: Path) -> None:
    result = check(tmp_path / "nowhere", "ab" * 20, None, [], CFG)
    assert result.status is CheckStatus.ERROR
    assert codes(result) == ["change.repo_unavailable"]


def test_a_folder_that_is_not_a_repository_is_inconclusive(tmp_path: Path) -> None:
    result = check(tmp_path, "ab" * 20, None, [], CFG)
    assert codes(result) == ["change.repo_unavailable"]


def test_change_to_wrong_content_is_a_hash_mismatch(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED.replace("a - b", "b - a")})
    result = run(repo, base, head, claim("calc.py", CALC, FIXED))
    assert codes(result) == ["change.hash_mismatch"]
    assert result.findings[0].expected == sha256(FIXED.encode())


def test_crlf_is_hashed_as_raw_bytes(repo: GitRepo) -> None:
    base = repo.head()
    crlf = FIXED.replace("\n", "\r\n").encode()
    mixed = FIXED.replace("\n", "\r\n", 2).encode()
    head = repo.commit({"calc.py": crlf, "mixed.txt": mixed})
    ok = run(repo, base, head, claim("calc.py", CALC, crlf), claim("mixed.txt", None, mixed))
    assert ok.status is CheckStatus.PASS, ok.findings
    normalised = run(
        repo, base, head, claim("calc.py", CALC, FIXED), claim("mixed.txt", None, mixed)
    )
    assert codes(normalised) == ["change.hash_mismatch"]


def test_wrong_before_hash_is_reported(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    result = run(repo, base, head, claim("calc.py", "something else", FIXED))
    assert codes(result) == ["change.before_mismatch"]


def test_claimed_file_absent_at_head_is_missing(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    result = run(
        repo, base, head, claim("calc.py", CALC, FIXED), claim("tests/test_new.py", None, "x")
    )
    assert codes(result) == ["change.missing"]


def test_untracked_file_left_out_of_the_commit_is_missing(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"new.py": "x = 1\n", "calc.py": FIXED})
    repo.git("commit", "-q", "-a", "-m", "commit -a leaves new.py out")
    result = run(
        repo, base, repo.head(), claim("calc.py", CALC, FIXED), claim("new.py", None, "x = 1\n")
    )
    assert codes(result) == ["change.missing"]


def test_claimed_delete_of_a_file_still_there_fails(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    result = run(repo, base, head, claim("calc.py", CALC, FIXED), claim("pytest.ini", "x", None))
    assert sorted(codes(result)) == ["change.before_mismatch", "change.delete_not_applied"]


def test_a_real_delete_passes(repo: GitRepo) -> None:
    base = repo.head()
    ini = "[pytest]\npythonpath = .\n"
    head = repo.commit({"pytest.ini": None})
    assert run(repo, base, head, claim("pytest.ini", ini, None)).status is CheckStatus.PASS


def test_undeclared_committed_change_fails(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED, "README": "surprise\n"})
    result = run(repo, base, head, claim("calc.py", CALC, FIXED))
    assert codes(result) == ["change.undeclared"]
    assert result.findings[0].path == "README"


def test_zero_claims_with_a_change_is_not_a_pass(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    assert codes(run(repo, base, head)) == ["change.undeclared"]


def test_untracked_not_ignored_file_is_undeclared_in_worktree(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"calc.py": FIXED, "scratch.txt": "notes\n"})
    result = run(repo, base, None, claim("calc.py", CALC, FIXED))
    assert codes(result) == ["change.undeclared"]
    assert result.findings[0].path == "scratch.txt"


def test_ignored_and_generated_files_do_not_count(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"calc.py": FIXED, "build/out.bin": b"\x00gen", "__pycache__/calc.pyc": b"pyc"})
    result = run(repo, base, None, claim("calc.py", CALC, FIXED))
    assert result.status is CheckStatus.PASS, result.findings


def test_touched_but_unchanged_file_is_not_a_change(repo: GitRepo) -> None:
    base = repo.head()
    os.utime(repo.path / "tests" / "test_calc.py", (1, 1))  # stale stat data only
    repo.write({"calc.py": FIXED})
    assert run(repo, base, None, claim("calc.py", CALC, FIXED)).status is CheckStatus.PASS


def test_staged_and_deleted_worktree_changes_are_seen(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"pytest.ini": None, "staged.txt": "s\n"})
    repo.git("add", "staged.txt")
    result = run(repo, base, None)
    assert sorted(f.path or "" for f in result.findings) == ["pytest.ini", "staged.txt"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "absolute"),
        ("../outside.txt", "'..'"),
        ("src/../../x", "'..'"),
        ("src\\calc.py", "backslash"),
        ("calc.py\x00.txt", "NUL"),
        ("src//calc.py", "empty segment"),
        ("src/", "empty segment"),
        ("", "empty"),
        ("./calc.py", "'.'"),
    ],
)
def test_paths_reaching_outside_the_root_are_refused(repo: GitRepo, path: str, reason: str) -> None:
    result = run(repo, repo.head(), None, claim(path, None, "x"))
    assert codes(result) == ["change.path_unsafe"]
    assert reason in result.findings[0].message


def test_the_same_path_claimed_twice_fails(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    result = run(repo, base, head, claim("calc.py", CALC, FIXED), claim("calc.py", CALC, FIXED))
    assert codes(result) == ["change.duplicate_claim"]


def test_action_must_agree_with_hashes(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    bad = ClaimedChange(
        path="calc.py",
        action="create",
        sha256_before=sha256(CALC.encode()),
        sha256_after=sha256(FIXED.encode()),
    )
    assert codes(run(repo, base, head, bad)) == ["change.action_inconsistent"]


def test_change_under_a_protected_path_fails(repo: GitRepo) -> None:
    base = repo.head()
    tests = (repo.path / "tests" / "test_calc.py").read_text()
    head = repo.commit({"tests/test_calc.py": "def test_nothing():\n    pass\n"})
    cfg = RepositoryConfig("calc", protected_paths=("tests/**",))
    result = run(
        repo,
        base,
        head,
        claim("tests/test_calc.py", tests, "def test_nothing():\n    pass\n"),
        cfg=cfg,
    )
    assert codes(result) == ["change.protected_path"]


def test_undeclared_change_under_a_protected_path_says_both(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"tests/conftest.py": "x = 1\n"})
    cfg = RepositoryConfig("calc", protected_paths=("tests/**",))
    assert codes(run(repo, base, head, cfg=cfg)) == ["change.undeclared", "change.protected_path"]


def test_a_protected_name_without_a_slash_matches_at_any_depth(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"tests/sub/conftest.py": "x = 1\n"})
    cfg = RepositoryConfig("calc", protected_paths=("conftest.py",))
    found = run(repo, base, head, claim("tests/sub/conftest.py", None, "x = 1\n"), cfg=cfg)
    assert codes(found) == ["change.protected_path"]
    assert "'conftest.py'" in found.findings[0].message


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("conftest.py", "conftest.py", True),
        ("conftest.py", "a/b/conftest.py", True),  # no slash: any depth, as in .gitignore
        ("conftest.py", "a/conftest.py.bak", False),
        ("/conftest.py", "a/conftest.py", False),  # a leading slash anchors at the root
        ("tests/**", "tests/a/b/test_x.py", True),
        ("tests/**", "src/tests/x.py", False),  # a slash inside anchors too
        ("tests/", "src/tests/x.py", True),  # a trailing slash alone does not
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),  # * stops at /
        ("**/fixtures/**", "a/fixtures/b/c.json", True),
        ("pytest.in?", "pytest.ini", True),
        ("*.[ch]", "lib/x.h", True),
        ("!secret.txt", "secret.txt", False),  # no negation: the "!" is a letter
        ("!secret.txt", "!secret.txt", True),
        ("#notes", "#notes", True),  # no comment either
    ],
)
def test_protected_patterns_follow_git_wildmatch(pattern: str, path: str, matches: bool) -> None:
    assert glob_matches(pattern, path) is matches


def test_a_cache_makes_a_second_check_read_no_blob(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": FIXED})
    cache = MemoryDigestCache()
    first = check(repo.path, base, head, [claim("calc.py", CALC, FIXED)], CFG, cache=cache)
    assert first.status is CheckStatus.PASS, first.findings
    assert sorted(cache.digests.values()) == sorted([sha256(CALC.encode()), sha256(FIXED.encode())])
    for commit in (base, head):  # the blobs go; the trees and commits stay
        oid = repo.git("rev-parse", f"{commit}:calc.py")
        (repo.path / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
    again = check(repo.path, base, head, [claim("calc.py", CALC, FIXED)], CFG, cache=cache)
    assert again.status is CheckStatus.PASS, again.findings
    assert codes(check(repo.path, base, head, [claim("calc.py", CALC, FIXED)], CFG)) == [
        "change.git_failed"
    ]


def test_a_cached_digest_holds_in_another_repository(repo: GitRepo, tmp_path: Path) -> None:
    other = GitRepo(tmp_path / "other")
    other_base = other.commit({"calc.py": CALC})
    other_head = other.commit({"calc.py": FIXED})
    cache = MemoryDigestCache()
    check(other.path, other_base, other_head, [claim("calc.py", CALC, FIXED)], CFG, cache=cache)
    base = repo.head()
    head = repo.commit({"calc.py": FIXED + "# one more line\n"})
    # Same content as in `other` at base: a hit; new content at head: read and learnt.
    result = check(repo.path, base, head, [claim("calc.py", CALC, FIXED)], CFG, cache=cache)
    assert codes(result) == ["change.hash_mismatch"]
    assert sha256((FIXED + "# one more line\n").encode()) in cache.digests.values()


def test_unicode_paths_compare_byte_for_byte(repo: GitRepo) -> None:
    nfc = unicodedata.normalize("NFC", "src/données.py")
    nfd = unicodedata.normalize("NFD", nfc)
    base = repo.head()
    head = repo.commit({nfc: "x = 1\n"})
    assert run(repo, base, head, claim(nfc, None, "x = 1\n")).status is CheckStatus.PASS
    result = run(repo, base, head, claim(nfd, None, "x = 1\n"))
    assert codes(result) == ["change.missing", "change.undeclared"]
    assert "NFC form" in result.findings[0].message


def test_symlink_blob_in_a_commit_is_refused(repo: GitRepo) -> None:
    base = repo.head()
    os.symlink("/etc/passwd", repo.path / "link")
    head = repo.commit()
    result = run(repo, base, head, claim("link", None, "/etc/passwd"))
    assert codes(result) == ["change.symlink"]


def test_symlink_escaping_root_in_worktree_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    base = repo.head()
    os.symlink(outside, repo.path / "data")
    result = run(repo, base, None, claim("data/secret.txt", None, "secret\n"))
    assert codes(result) == ["change.symlink", "change.undeclared"]  # the link itself is new
    assert result.findings[0].found is None  # nothing behind the link was read


def test_symlinked_file_in_worktree_is_refused(repo: GitRepo) -> None:
    base = repo.head()
    os.symlink("calc.py", repo.path / "alias.py")
    result = run(repo, base, None, claim("alias.py", None, CALC))
    assert codes(result)[0] == "change.symlink"


def test_a_folder_claimed_as_a_file_is_refused(repo: GitRepo) -> None:
    result = run(repo, repo.head(), None, claim("tests", None, "x"))
    assert codes(result) == ["change.not_a_file"]


# -- modes -------------------------------------------------------------------------------


def mode_claim(path: str, content: str, before: str | None, after: str | None) -> ClaimedChange:
    digest = sha256(content.encode())
    return ClaimedChange(
        path=path,
        action="modify",
        sha256_before=digest,
        sha256_after=digest,
        mode_before=before,  # type: ignore[arg-type]
        mode_after=after,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("committed", [True, False], ids=["commit", "worktree"])
def test_a_claimed_chmod_passes_and_a_wrong_mode_is_a_mode_mismatch(
    repo: GitRepo, committed: bool
) -> None:
    base = repo.head()
    os.chmod(repo.path / "calc.py", 0o755)
    head = repo.commit() if committed else None
    honest = run(repo, base, head, mode_claim("calc.py", CALC, "100644", "100755"))
    assert honest.status is CheckStatus.PASS, honest.findings

    lying = run(repo, base, head, mode_claim("calc.py", CALC, "100755", "100644"))
    assert [(f.code, f.expected, f.found) for f in lying.findings] == [
        ("change.mode_mismatch", "100755", "100644"),
        ("change.mode_mismatch", "100644", "100755"),
    ]


@pytest.mark.parametrize("committed", [True, False], ids=["commit", "worktree"])
def test_a_chmod_claimed_without_modes_passes_on_its_hashes(repo: GitRepo, committed: bool) -> None:
    """Reports written before modes could be claimed read as they did (docs/findings.md)."""
    base = repo.head()
    os.chmod(repo.path / "calc.py", 0o755)
    head = repo.commit() if committed else None
    result = run(repo, base, head, mode_claim("calc.py", CALC, None, None))
    assert result.status is CheckStatus.PASS, result.findings


def test_a_mode_before_on_a_create_is_inconsistent(repo: GitRepo) -> None:
    base = repo.head()
    head = repo.commit({"new.txt": "n\n"})
    bad = claim("new.txt", None, "n\n").model_copy(update={"mode_before": "100644"})
    result = run(repo, base, head, bad)
    assert codes(result) == ["change.action_inconsistent"]
    assert result.findings[0].expected == "a create must have no mode_before"


# -- end-of-line attributes: the bytes git stores ----------------------------------------

# Line endings of every kind git's conversion treats apart; one CRLF straddles the 1 MiB
# chunk the files are read in.
EOL_FILES: dict[str, bytes] = {
    "crlf.txt": b"one\r\ntwo\r\n",
    "mixed.txt": b"one\r\ntwo\nthree\r\n",
    "lone_cr.txt": b"one\rtwo\r\n",  # text=auto: binary (a lone CR), kept as it is
    "double_cr.txt": b"one\r\r\ntwo\r\n",
    "nul.bin": b"one\r\n\0two\r\n",
    "dos_eof.txt": b"one\r\ntwo\r\n\x1a",
    "big.txt": b"a" * ((1 << 20) - 1) + b"\r\nend\r\n",
    "lf.txt": b"one\ntwo\n",
    "empty.txt": b"",
}


@pytest.mark.parametrize(
    "attributes",
    ["* text=auto\n", "* text=auto eol=crlf\n", "* text\n", "* eol=crlf\n", "* -text\n"],
)
def test_worktree_files_hash_as_the_blobs_git_add_stores(tmp_path: Path, attributes: str) -> None:
    """Whatever the attributes, a working tree just committed with ``git add`` has no change."""
    repo = GitRepo(tmp_path / "r")
    repo.commit({".gitattributes": attributes, **EOL_FILES})
    result = run(repo, repo.head(), None)
    assert result.status is CheckStatus.PASS, result.findings
    assert result.details["changed"] == 0


def test_a_crlf_checkout_claims_the_lf_blob_and_a_real_change_is_still_seen(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    base = repo.commit({".gitattributes": "*.py text eol=crlf\n", "calc.py": CALC})
    (repo.path / "calc.py").unlink()
    repo.git("checkout", "--", "calc.py")
    assert b"\r\n" in (repo.path / "calc.py").read_bytes()
    assert run(repo, base, None).status is CheckStatus.PASS

    repo.write({"calc.py": FIXED.replace("\n", "\r\n")})
    result = run(repo, base, None, claim("calc.py", CALC, FIXED))
    assert result.status is CheckStatus.PASS, result.findings
    raw = run(repo, base, None, claim("calc.py", CALC, FIXED.replace("\n", "\r\n")))
    assert codes(raw) == ["change.hash_mismatch"]


def test_text_auto_leaves_a_file_whose_base_blob_holds_crlf_as_it_is(tmp_path: Path) -> None:
    """git's safer autocrlf: a blob committed with CRLF before the attribute stays unconverted."""
    repo = GitRepo(tmp_path / "r")
    repo.commit({"old.txt": b"one\r\ntwo\r\n"})
    base = repo.commit({".gitattributes": "* text=auto\n"})
    assert run(repo, base, None).status is CheckStatus.PASS
    repo.git("add", "-A")
    assert repo.git("status", "--porcelain") == ""
