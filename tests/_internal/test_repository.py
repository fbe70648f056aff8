"""The head's tree read from its raw objects lists exactly what ``git ls-tree -r -t`` lists."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.gitrepo import GitRepo
from verifier._internal.repository import Repository, _parse_tree


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, check=True
    ).stdout


def _literally(cwd: Path, kind: str, data: bytes) -> bytes:
    """An object git would refuse to make, written as it is: its raw id."""
    oid = _git(cwd, "hash-object", "-w", "--literally", "-t", kind, "--stdin", stdin=data)
    return bytes.fromhex(oid.decode().strip())


def _both(path: Path, commit: str) -> tuple[object, object]:
    repo = Repository(path)
    listed = _parse_tree(_git(path, "ls-tree", "-r", "-t", "-z", "--full-tree", commit))
    with repo._git.object_reader() as reader:
        entries, folders, _ = repo._walk_tree(reader, commit)
    return (entries, folders), listed


def test_an_ordinary_history_walks_as_ls_tree_lists(repo: GitRepo) -> None:
    for i in range(3):
        repo.commit({f"pkg/sub{i}/m.py": f"X = {i}\n", "a b/c d.txt": str(i), "é.txt": "é"})
    for commit in repo.git("rev-list", "HEAD").split():
        walked, listed = _both(repo.path, commit)
        assert walked == listed


def test_trees_git_would_refuse_walk_as_ls_tree_lists(repo: GitRepo) -> None:
    """Duplicate names, odd modes, a gitlink, a link, names that are not UTF-8."""
    blob = bytes.fromhex(repo.git("rev-parse", "HEAD:calc.py"))
    sub = _literally(
        repo.path,
        "tree",
        b"100664 x\0" + blob + b"100644 y z\0" + blob + b"120000 \xff\xfe\0" + blob,
    )
    entries = (
        b"100644 calc.py\0" + blob + b"100644 calc.py\0" + blob
        + b"040000 d\0" + sub + b"40000 d\0" + sub
        + b"160000 m\0" + blob + b"100755 e\0" + blob
        + b"40000 \xc3\xa9\0" + sub + b"644 odd\0" + blob + b"1 one\0" + blob
    )  # fmt: skip
    root = _literally(repo.path, "tree", entries).hex()
    commit = repo.git("commit-tree", root, "-m", "x")
    walked, listed = _both(repo.path, commit)
    assert walked == listed
    assert "calc.py" in listed[0]  # type: ignore[index]
