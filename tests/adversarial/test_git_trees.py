"""Trees and commits git would refuse: one tool reads them one way, another the other way."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo, sha256
from tests.support.sessions import CALC, PYTEST, fixed_session, to_bytes
from verifier.app.pipeline import verify_report
from verifier.checks.changes import check
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import ClaimedChange
from verifier.findings import CheckStatus, DeliveryStatus
from verifier.verify import Options

FIXED = CALC.replace("subtract(a, b):\n    return a + b", "subtract(a, b):\n    return a - b")
# What the tests would run instead of what was claimed: it passes, and nobody hashed it.
UNCLAIMED = FIXED + "\n# not the bytes that were claimed\n"


def literal_object(repo: GitRepo, kind: str, data: bytes) -> str:
    """Write an object as it is, with no check: ``git hash-object --literally``."""
    done = subprocess.run(
        ["git", "hash-object", "-w", "--literally", "-t", kind, "--stdin"],
        cwd=repo.path,
        input=data,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode().strip()


def raw_tree(entries: list[tuple[str, str, str]]) -> bytes:
    """A tree object's bytes from (mode, name, id), in the order given."""
    return b"".join(
        mode.encode() + b" " + name.encode() + b"\0" + bytes.fromhex(oid)
        for mode, name, oid in entries
    )


def root_entries(repo: GitRepo, commit: str) -> list[tuple[str, str, str]]:
    entries = []
    for line in repo.git("ls-tree", commit).splitlines():
        meta, name = line.split("\t")
        mode, _, oid = meta.split()
        entries.append(("40000" if mode == "040000" else mode, name, oid))
    return entries


def commit_tree(repo: GitRepo, tree: str, parent: str) -> str:
    return repo.git("commit-tree", tree, "-p", parent, "-m", "crafted")


def blob(repo: GitRepo, text: str) -> str:
    path = repo.path.parent / "blob.tmp"
    path.write_text(text)
    return repo.git("hash-object", "-w", str(path))


def test_a_head_tree_listing_calc_py_twice_is_not_delivered(repo: GitRepo, tmp_path: Path) -> None:
    """The changes check would hash one entry and the copy for the tests hold the other."""
    report = fixed_session(repo).report()
    base, head = report["repo"]["base_commit"], report["repo"]["head_commit"]
    entries = root_entries(repo, head)
    at = next(i for i, (_, name, _) in enumerate(entries) if name == "calc.py")
    entries.insert(at, ("100644", "calc.py", blob(repo, UNCLAIMED)))  # first: what a checkout takes
    crafted = commit_tree(repo, literal_object(repo, "tree", raw_tree(entries)), base)
    report["repo"]["head_commit"] = crafted
    repo_cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60
    )
    config = Config(
        database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", repositories={"calc": repo_cfg}
    )

    outcome = verify_report(to_bytes(report), config, Options(repo_path=repo.path), store=False)

    verdict = outcome.verification
    assert verdict.delivery_status is DeliveryStatus.NOT_DELIVERED
    changes = verdict.checks["changes"]
    assert [f.code for f in changes.findings] == ["change.tree_invalid"]
    assert changes.findings[0].found == "duplicateEntries: contains duplicate file entries"
    assert outcome.exit_code == 1


def modify(before: str, after: str) -> ClaimedChange:
    return ClaimedChange(
        path="calc.py",
        action="modify",
        sha256_before=sha256(before.encode()),
        sha256_after=sha256(after.encode()),
    )


def crafted_head(repo: GitRepo, extra: tuple[str, str, str], *, first: bool = False) -> str:
    """A head commit fixing calc.py whose root tree also holds `extra`, git's order kept."""
    base = repo.head()
    entries = [
        e if e[1] != "calc.py" else ("100644", "calc.py", blob(repo, FIXED))
        for e in root_entries(repo, base)
    ]
    entries = [extra, *entries] if first else [*entries, extra]
    return commit_tree(repo, literal_object(repo, "tree", raw_tree(entries)), base)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (".git", "hasDotgit: contains '.git'"),
        (".GIT", "hasDotgit: contains '.git'"),
        (".git.", "hasDotgit: contains '.git'"),
        ("git~1", "hasDotgit: contains '.git'"),
        (".g\u200cit", "hasDotgit: contains '.git'"),
    ],
)
def test_a_name_some_file_system_takes_for_dot_git_is_refused(
    repo: GitRepo, name: str, message: str
) -> None:
    base = repo.head()
    evil = blob(repo, "[core]\n\tfsmonitor = touch /tmp/owned\n")
    folder = literal_object(repo, "tree", raw_tree([("100644", "config", evil)]))
    head = crafted_head(repo, ("40000", name, folder), first=name.startswith("."))
    result = check(repo.path, base, head, [modify(CALC, FIXED)], RepositoryConfig("calc"))
    assert result.status is CheckStatus.FAIL
    assert ("change.tree_invalid", "", message) in {
        (f.code, f.path or "", f.found) for f in result.findings
    }


def test_an_unsorted_tree_is_refused(repo: GitRepo) -> None:
    base = repo.head()
    head = crafted_head(repo, ("100644", "aaa.txt", blob(repo, "late\n")))  # last, not first
    result = check(repo.path, base, head, [modify(CALC, FIXED)], RepositoryConfig("calc"))
    found = {(f.code, f.found) for f in result.findings}
    assert ("change.tree_invalid", "treeNotSorted: not properly sorted") in found


def test_a_bad_mode_in_a_subfolder_names_the_folder(repo: GitRepo) -> None:
    base = repo.head()
    tests_tree = repo.git("rev-parse", f"{base}:tests")
    test_blob = repo.git("rev-parse", f"{base}:tests/test_calc.py")
    odd = literal_object(repo, "tree", raw_tree([("100664", "test_calc.py", test_blob)]))
    entries = [
        (m, n, odd if n == "tests" else (blob(repo, FIXED) if n == "calc.py" else o))
        for m, n, o in root_entries(repo, base)
    ]
    head = commit_tree(repo, literal_object(repo, "tree", raw_tree(entries)), base)
    assert tests_tree != odd
    result = check(repo.path, base, head, [modify(CALC, FIXED)], RepositoryConfig("calc"))
    assert [(f.code, f.path, f.found) for f in result.findings] == [
        ("change.tree_invalid", "tests", "badFilemode: contains bad file modes")
    ]


def test_a_commit_with_two_tree_lines_along_the_way_is_refused(repo: GitRepo) -> None:
    base = repo.head()
    tree = repo.git("rev-parse", f"{base}^{{tree}}")
    ident = "A <a@example.invalid> 1700000000 +0000"
    raw = f"tree {tree}\ntree {tree}\nparent {base}\nauthor {ident}\ncommitter {ident}\n\nodd\n"
    odd = literal_object(repo, "commit", raw.encode())
    repo.git("checkout", "-q", "--detach", odd)
    head = repo.commit({"calc.py": FIXED}, "fix on top")
    result = check(repo.path, base, head, [modify(CALC, FIXED)], RepositoryConfig("calc"))
    assert [(f.code, f.found) for f in result.findings] == [
        ("change.commit_invalid", "badTree: more than one 'tree' line")
    ]
    assert odd in result.findings[0].message


def test_an_honest_head_has_no_object_finding(repo: GitRepo) -> None:
    base = repo.head()
    repo.write({"tests/sub/deep/test_more.py": "def test_x():\n    pass\n"})
    head = repo.commit({"calc.py": FIXED})
    claims = [
        modify(CALC, FIXED),
        ClaimedChange(
            path="tests/sub/deep/test_more.py",
            action="create",
            sha256_before=None,
            sha256_after=sha256(b"def test_x():\n    pass\n"),
        ),
    ]
    result = check(repo.path, base, head, claims, RepositoryConfig("calc"))
    assert result.status is CheckStatus.PASS, result.findings
