"""verifier._internal.snapshot: a copy of the head state, made without touching the repository."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from verifier._internal.git import MemoryDigestCache
from verifier._internal.snapshot import SnapshotError, materialize, temp_parent
from verifier.errors import InfrastructureError


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


def _commit_tree(repo: GitRepo, entries: list[tuple[str, str, str]]) -> str:
    """A commit of a tree made by hand from (mode, blob, name): names git would refuse."""
    listing = "".join(f"{mode} blob {blob}\t{name}\x00" for mode, blob, name in entries)
    tree = (
        subprocess.run(
            ["git", "mktree", "-z"], cwd=repo.path, check=True, capture_output=True,
            input=listing.encode(),
        )
        .stdout.decode()
        .strip()
    )  # fmt: skip
    return repo.git("commit-tree", tree, "-m", "by hand")


def test_a_tree_naming_git_storage_or_parent_folders_is_not_copied_there(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit({"a.txt": "a\n"})
    hook = repo.git("hash-object", "-w", "--stdin")  # the empty blob
    entries = [("100755", hook, ".GIT"), ("100644", hook, ".."), ("100644", hook, "ok.txt")]
    info = materialize(repo.path, _commit_tree(repo, entries), tmp_path / "out" / "copy")
    assert sorted(os.listdir(tmp_path / "out")) == ["copy"]
    assert _files(tmp_path / "out" / "copy") == {"ok.txt": b""}
    reasons = {s.path: s.reason for s in info.skipped}
    assert reasons == {
        ".GIT": "not a plain relative path: the path is inside a '.git' folder, which is git's, "
        "not the repository's",
        "..": "not a plain relative path: the path has a '..' segment",
    }


def test_a_link_target_longer_than_any_path_is_skipped(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit({"a.txt": "a\n"})
    target = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo.path, check=True,
        capture_output=True, input=b"x/" * 5000,
    ).stdout.decode().strip()  # fmt: skip
    plain = repo.git("rev-parse", "HEAD:a.txt")
    commit = _commit_tree(repo, [("120000", target, "link"), ("100644", plain, "a.txt")])
    info = materialize(repo.path, commit, tmp_path / "copy")
    assert _files(tmp_path / "copy") == {"a.txt": b"a\n"}
    assert [(s.path, s.reason) for s in info.skipped] == [
        ("link", "link target longer than any path")
    ]


@pytest.mark.parametrize("mode", ["commit", "worktree"])
def test_the_size_cap_stops_before_the_file_that_crosses_it(
    repo: GitRepo, tmp_path: Path, mode: str
) -> None:
    commit = repo.commit({"a.txt": "a" * 10, "b.txt": "b" * 100, "c.txt": "c"})
    with pytest.raises(SnapshotError, match="over 50 bytes"):
        materialize(
            repo.path, commit if mode == "commit" else None, tmp_path / "copy", max_bytes=50
        )
    assert _files(tmp_path / "copy") == {"a.txt": b"a" * 10}  # b.txt never written


@pytest.mark.parametrize("mode", ["commit", "worktree"])
def test_the_file_cap_stops_before_a_file_past_it_is_written(
    repo: GitRepo, tmp_path: Path, mode: str
) -> None:
    # cap + 1 entries (a link counts too). A commit's listing is refused before the first
    # write; the working tree's, path by path, before the one past the cap is opened.
    commit = repo.commit({**{f"f{i:02}.txt": "" for i in range(4)}, "z.txt": "z"})
    os.symlink("z.txt", repo.path / "link")
    commit = repo.commit({})
    source = commit if mode == "commit" else None
    with pytest.raises(SnapshotError, match=r"more than 5 files \(max_snapshot_files\)"):
        materialize(repo.path, source, tmp_path / "copy", max_files=5)
    copied = _files(tmp_path / "copy")
    if mode == "commit":
        assert copied == {}
    else:  # "z.txt", the sixth in git's order, never written (links are made last)
        assert sorted(copied) == [f"f{i:02}.txt" for i in range(4)]
    info = materialize(repo.path, source, tmp_path / "fits", max_files=6)
    assert (info.files, info.symlinks) == (5, 1)


def test_digests_come_from_the_cache_and_new_ones_go_into_it(repo: GitRepo, tmp_path: Path) -> None:
    commit = repo.commit({"a.txt": "a\n", "b.txt": "b\n"})
    a, b = repo.git("rev-parse", f"{commit}:a.txt"), repo.git("rev-parse", f"{commit}:b.txt")
    cache = MemoryDigestCache()
    cache.digests[a] = "1" * 64  # what the changes check would have put there
    info = materialize(repo.path, commit, tmp_path / "copy", cache=cache)
    assert info.digests == {"a.txt": "1" * 64, "b.txt": hashlib.sha256(b"b\n").hexdigest()}
    assert cache.digests == {a: "1" * 64, b: hashlib.sha256(b"b\n").hexdigest()}
    assert _files(tmp_path / "copy") == {"a.txt": b"a\n", "b.txt": b"b\n"}


def test_temp_parent_picks_a_memory_folder_only_when_it_has_room(tmp_path: Path) -> None:
    assert temp_parent(shm=tmp_path / "missing") is None
    assert temp_parent(0, shm=tmp_path) == tmp_path
    assert temp_parent(1 << 60, shm=tmp_path) is None  # an exabyte: no room anywhere
    (tmp_path / "link").symlink_to(tmp_path)
    assert temp_parent(0, shm=tmp_path / "link") is None


def _object(repo: GitRepo, kind: str, data: bytes) -> str:
    done = subprocess.run(
        ["git", "hash-object", "-w", "--literally", "-t", kind, "--stdin"],
        cwd=repo.path, input=data, capture_output=True, check=True,
    )  # fmt: skip
    return done.stdout.decode().strip()


def test_a_tree_listing_a_path_twice_is_not_copied(repo: GitRepo, tmp_path: Path) -> None:
    """The changes check reads the last entry of a path; a copy holding the first is refused."""
    first = _object(repo, "blob", b"def f():\n    return 1\n")
    last = _object(repo, "blob", b"def f():\n    return 2\n")
    raw = b"".join(b"100644 calc.py\0" + bytes.fromhex(oid) for oid in (first, last))
    commit = repo.git("commit-tree", _object(repo, "tree", raw), "-m", "twice")

    with pytest.raises(SnapshotError, match="names the path more than once"):
        materialize(repo.path, commit, tmp_path / "copy")


def test_worktree_entries_hold_modes_and_link_targets(repo: GitRepo, tmp_path: Path) -> None:
    repo.write({"run.sh": "#!/bin/sh\n", "new.txt": "created, not committed\n"})
    (repo.path / "run.sh").chmod(0o755)
    os.symlink("run.sh", repo.path / "link")
    repo.git("add", "run.sh", "link")
    repo.git("commit", "-qm", "c")

    info = materialize(repo.path, None, tmp_path / "copy")

    assert info.entries == {
        "run.sh": "100755 " + hashlib.sha256(b"#!/bin/sh\n").hexdigest(),
        "new.txt": "100644 " + hashlib.sha256(b"created, not committed\n").hexdigest(),
        "link": "120000 run.sh",
    }
