"""verifier.snapshot: a copy of the head state, made without touching the repository."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo

from verifier.errors import InfrastructureError
from verifier.snapshot import SnapshotError, materialize


def _files(root: Path) -> dict[str, bytes | str]:
    """Every path under `root`: file bytes, or "-> target" for a link."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                found[rel] = path.read_bytes()
    return found


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "r")


def test_commit_mode_copies_the_committed_bytes_and_permissions(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.write({"run.sh": "#!/bin/sh\necho hi\n", "pkg/mod.py": b"x = 1\r\n\xff"})
    (repo.path / "run.sh").chmod(0o755)
    commit = repo.commit()

    info = materialize(repo.path, commit, tmp_path / "copy")

    assert _files(tmp_path / "copy") == {
        "run.sh": b"#!/bin/sh\necho hi\n",
        "pkg/mod.py": b"x = 1\r\n\xff",
    }
    assert stat.S_IMODE((tmp_path / "copy" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "copy" / "pkg" / "mod.py").stat().st_mode) == 0o644
    assert (info.mode, info.commit, info.files, info.bytes) == ("commit", commit, 2, 26)
    assert info.skipped == ()


def test_commit_mode_takes_the_commit_not_the_dirty_working_tree(
    repo: GitRepo, tmp_path: Path
) -> None:
    first = repo.commit({"a.txt": "one\n"})
    repo.commit({"a.txt": "two\n"})
    repo.write({"a.txt": "dirty\n", "untracked.txt": "u\n"})

    materialize(repo.path, first[:12], tmp_path / "copy")

    assert _files(tmp_path / "copy") == {"a.txt": b"one\n"}


def test_commit_mode_ignores_export_attributes(repo: GitRepo, tmp_path: Path) -> None:
    # `git archive` would drop the file and rewrite the placeholder; the copy must not.
    files = {
        ".gitattributes": "test_hidden.py export-ignore\nversion.txt export-subst\n",
        "test_hidden.py": "def test_x():\n    assert False\n",
        "version.txt": "$Format:%H$\n",
    }
    commit = repo.commit(files)

    materialize(repo.path, commit, tmp_path / "copy")

    assert _files(tmp_path / "copy") == {k: v.encode() for k, v in files.items()}


def test_unknown_commit_raises_snapshot_error(repo: GitRepo, tmp_path: Path) -> None:
    repo.commit({"a.txt": "a"})
    missing = "0123456789abcdef" * 2 + "01234567"
    with pytest.raises(SnapshotError, match=f"commit {missing} does not exist"):
        materialize(repo.path, missing, tmp_path / "copy")
    assert issubclass(SnapshotError, InfrastructureError)


def test_commit_that_is_not_hexadecimal_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    repo.commit({"a.txt": "a"})
    for bad in ("HEAD", "--output=/tmp/x", "main"):
        with pytest.raises(SnapshotError, match="not a hexadecimal commit id"):
            materialize(repo.path, bad, tmp_path / "copy")


def test_directory_that_is_not_a_repository_raises_snapshot_error(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(SnapshotError, match="git ls-files failed"):
        materialize(tmp_path / "plain", None, tmp_path / "copy")


def test_worktree_mode_copies_uncommitted_and_untracked_files_but_not_ignored_ones(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.commit({".gitignore": "*.log\nbuild/\n", "a.txt": "committed\n", "gone.txt": "g\n"})
    repo.write(
        {
            "a.txt": "changed, not committed\n",
            "gone.txt": None,
            "new/untracked.txt": "new\n",
            "debug.log": "ignored\n",
            "build/out.bin": "ignored\n",
        }
    )

    info = materialize(repo.path, None, tmp_path / "copy")

    assert _files(tmp_path / "copy") == {
        ".gitignore": b"*.log\nbuild/\n",
        "a.txt": b"changed, not committed\n",
        "new/untracked.txt": b"new\n",
    }
    assert (info.mode, info.commit, info.files) == ("worktree", None, 3)


def test_worktree_mode_keeps_permissions_and_unusual_names(repo: GitRepo, tmp_path: Path) -> None:
    repo.commit({"données é.txt": "d\n", "tool": "#!/bin/sh\n"})
    (repo.path / "tool").chmod(0o750)

    materialize(repo.path, None, tmp_path / "copy")

    assert (tmp_path / "copy" / "données é.txt").read_bytes() == b"d\n"
    assert stat.S_IMODE((tmp_path / "copy" / "tool").stat().st_mode) == 0o750


@pytest.mark.parametrize("mode", ["commit", "worktree"])
def test_symlink_inside_the_copy_is_kept(repo: GitRepo, tmp_path: Path, mode: str) -> None:
    repo.write({"data/real.txt": "r\n"})
    os.symlink("data/real.txt", repo.path / "alias.txt")
    commit = repo.commit()

    info = materialize(repo.path, commit if mode == "commit" else None, tmp_path / "copy")

    assert os.readlink(tmp_path / "copy" / "alias.txt") == "data/real.txt"
    assert (tmp_path / "copy" / "alias.txt").read_bytes() == b"r\n"
    assert info.symlinks == 1
    assert info.skipped == ()


@pytest.mark.parametrize("mode", ["commit", "worktree"])
def test_symlink_escaping_root_is_refused(repo: GitRepo, tmp_path: Path, mode: str) -> None:
    (tmp_path / "outside.txt").write_text("secret\n")
    repo.write({"keep.txt": "k\n"})
    os.symlink("/etc/passwd", repo.path / "absolute")
    os.symlink("../../outside.txt", repo.path / "relative")
    # Each link looks inside on paper; together they climb out: loop -> ".", then ../..
    os.symlink(".", repo.path / "loop")
    os.symlink("loop/loop/../outside.txt", repo.path / "chained")
    commit = repo.commit()

    info = materialize(repo.path, commit if mode == "commit" else None, tmp_path / "copy")

    copied = _files(tmp_path / "copy")
    assert set(copied) == {"keep.txt", "loop"}
    assert {s.path for s in info.skipped} == {"absolute", "relative", "chained"}
    assert all("leads outside the copy" in s.reason for s in info.skipped)


def test_tracked_file_under_a_directory_turned_into_an_outside_link_is_not_read(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.commit({"lib/x.py": "inside\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("SECRET\n")
    (repo.path / "lib" / "x.py").unlink()
    (repo.path / "lib").rmdir()
    os.symlink(outside, repo.path / "lib")

    info = materialize(repo.path, None, tmp_path / "copy")

    assert not (tmp_path / "copy" / "lib").exists()
    assert {s.path for s in info.skipped} == {"lib", "lib/x.py"}


@pytest.mark.parametrize("mode", ["commit", "worktree"])
def test_repository_is_unchanged_by_a_snapshot(repo: GitRepo, tmp_path: Path, mode: str) -> None:
    commit = repo.commit({"a.txt": "a\n", "b.txt": "b\n"})
    repo.write({"a.txt": "dirty\n", "c.txt": "untracked\n"})
    os.utime(repo.path / "b.txt", (1_000_000, 1_000_000))  # stale stat data invites a refresh
    before = repo.snapshot()

    materialize(repo.path, commit if mode == "commit" else None, tmp_path / "copy")

    assert repo.snapshot() == before


def test_replace_refs_do_not_change_the_commit_copied(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    base = repo.commit({"a.txt": "base\n"})
    bad = repo.commit({"a.txt": "bad\n"})
    repo.git("checkout", "-q", "--detach", base)
    good = repo.commit({"a.txt": "good\n"})
    repo.git("replace", bad, good)
    materialize(repo.path, bad, tmp_path / "copy")
    assert (tmp_path / "copy" / "a.txt").read_text() == "bad\n"


def test_a_committed_name_too_long_for_this_file_system_is_skipped(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit({"a.txt": "a\n"})
    blob = repo.git("hash-object", "-w", "--stdin")  # the empty blob
    long_name = "n" * 300
    tree = (
        subprocess.run(
            ["git", "mktree", "-z"],
            cwd=repo.path,
            check=True,
            capture_output=True,
            input=f"100644 blob {blob}\t{long_name}\x00100644 blob {blob}\tok.txt\x00".encode(),
        )
        .stdout.decode()
        .strip()
    )
    commit = repo.git("commit-tree", tree, "-m", "long name")
    info = materialize(repo.path, commit, tmp_path / "copy")
    assert [s.path for s in info.skipped] == [long_name]
    assert (tmp_path / "copy" / "ok.txt").exists()
    assert info.digests["ok.txt"] == hashlib.sha256(b"").hexdigest()
