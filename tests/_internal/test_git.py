"""verifier._internal.git: the one hardened git runner, the batch blob reader, the digest cache."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from verifier._internal.git import (
    CHUNK,
    Git,
    MemoryDigestCache,
    cached_digests,
    git_environment,
    is_object_id,
    remember_digests,
)
from verifier._internal.repository import Repository
from verifier.errors import InfrastructureError, ObjectCorrupt


class _PlumbingError(InfrastructureError):
    """A caller's own error class, as `verifier._internal.snapshot` passes `SnapshotError`."""


@pytest.fixture
def plain(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "r")


def _blob(repo: GitRepo, path: str, commit: str = "HEAD") -> str:
    return repo.git("rev-parse", f"{commit}:{path}")


def test_the_environment_drops_inherited_git_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    monkeypatch.setenv("GIT_INDEX_FILE", "/nonexistent")
    monkeypatch.setenv("GIT_OPTIONAL_LOCKS", "1")
    env = git_environment()
    assert "GIT_DIR" not in env and "GIT_INDEX_FILE" not in env
    assert env["GIT_OPTIONAL_LOCKS"] == "0"
    assert env["GIT_NO_REPLACE_OBJECTS"] == "1"
    assert env["GIT_TERMINAL_PROMPT"] == "0"


def test_a_failing_command_raises_the_callers_error_naming_the_command(plain: GitRepo) -> None:
    git = Git(plain.path, error=_PlumbingError)
    with pytest.raises(_PlumbingError, match=r"git rev-parse failed in .* \(exit 128\)"):
        git.run("rev-parse", "--verify", "no-such-thing")
    assert git.call("rev-parse", "--verify", "--quiet", "no-such-thing").returncode == 1


def test_a_hung_git_and_what_it_started_are_killed_at_the_timeout(
    plain: GitRepo, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    # A shell alias: git starts sh, which starts sleep, both off git's pipes; all must go.
    hang = f"alias.hang=!exec >/dev/null 2>&1; sleep 60 & echo $! > {pid_file}; wait"
    git = Git(plain.path, timeout_s=0.5, error=_PlumbingError)
    with pytest.raises(_PlumbingError, match=r"git -c timed out after 0.5s"):
        git.run("-c", hang, "hang")
    sleeper = int(pid_file.read_text())
    for _ in range(100):  # SIGKILL is sent; the exit itself may take a moment
        if _process_state(sleeper) in ("gone", "Z"):
            break
        time.sleep(0.05)
    assert _process_state(sleeper) in ("gone", "Z"), "the program git started is still running"


def _process_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except FileNotFoundError:
        return "gone"


def test_the_repositorys_fsmonitor_is_not_run(plain: GitRepo, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    plain.commit({"a.txt": "a\n"})
    plain.git("config", "core.fsmonitor", str(hook))
    Git(plain.path).run("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    assert not marker.exists()


def test_cat_file_streams_blobs_in_order_large_and_repeated(plain: GitRepo) -> None:
    big = os.urandom(CHUNK + 12345)  # more than one chunk
    plain.commit({"big.bin": big, "small.txt": "s\n", "empty": b""})
    ids = [_blob(plain, "small.txt"), _blob(plain, "big.bin"), _blob(plain, "empty")]
    ids.append(ids[0])
    got: list[bytes] = []
    with Git(plain.path).cat_file(ids) as batch:
        for oid in ids:
            got.append(batch.read(oid))
    assert got == [b"s\n", big, b"", b"s\n"]


def test_cat_file_header_gives_the_size_before_the_bytes(plain: GitRepo) -> None:
    plain.commit({"a.txt": "12345\n"})
    oid = _blob(plain, "a.txt")
    with Git(plain.path).cat_file([oid]) as batch:
        assert batch.header(oid) == 6
        chunks: list[bytes] = []
        assert batch.stream(oid, chunks.append) == 6
    assert chunks == [b"12345\n"]


def test_a_missing_blob_is_an_error_naming_it(plain: GitRepo) -> None:
    plain.commit({"a.txt": "a\n"})
    missing = "0" * 40
    with (
        pytest.raises(_PlumbingError, match=f"object {missing} is missing"),
        Git(plain.path, error=_PlumbingError).cat_file([missing]) as batch,
    ):
        batch.read(missing)


def test_a_record_other_than_the_one_expected_is_an_error(plain: GitRepo) -> None:
    plain.commit({"a.txt": "a\n", "b.txt": "b\n"})
    a, b = _blob(plain, "a.txt"), _blob(plain, "b.txt")
    with (
        pytest.raises(InfrastructureError, match=f"expected blob {b}"),
        Git(plain.path).cat_file([a]) as batch,
    ):
        batch.read(b)


def test_a_tree_is_not_read_as_a_blob(plain: GitRepo) -> None:
    plain.commit({"d/a.txt": "a\n"})
    tree = plain.git("rev-parse", "HEAD:d")
    with (
        pytest.raises(InfrastructureError, match=f"expected blob {tree}, got '{tree} tree"),
        Git(plain.path).cat_file([tree]) as batch,
    ):
        batch.read(tree)


def test_blob_sha256s_hashes_many_blobs_split_between_batches(plain: GitRepo) -> None:
    files = {f"f{i:03}.txt": f"content {i}\n".encode() for i in range(100)}
    plain.commit(files)
    ids = {_blob(plain, path): data for path, data in files.items()}
    digests = Git(plain.path).blob_sha256s(list(ids))
    assert digests == {oid: hashlib.sha256(data).hexdigest() for oid, data in ids.items()}


def test_the_cache_is_filled_then_spares_reading_the_blobs(plain: GitRepo) -> None:
    plain.commit({"a.txt": "a\n", "b.txt": "b\n"})
    a, b = _blob(plain, "a.txt"), _blob(plain, "b.txt")
    cache = MemoryDigestCache()
    first = Git(plain.path).blob_sha256s([a, b], cache=cache)
    assert (
        cache.digests
        == first
        == {
            a: hashlib.sha256(b"a\n").hexdigest(),
            b: hashlib.sha256(b"b\n").hexdigest(),
        }
    )
    # With the objects gone, only the cache can answer.
    for oid in (a, b):
        (plain.path / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
    assert Git(plain.path).blob_sha256s([a, b], cache=cache) == first
    with pytest.raises(InfrastructureError, match="missing"):
        Git(plain.path).blob_sha256s([a, b])


def test_a_malformed_cache_entry_is_ignored_and_the_blob_read(plain: GitRepo) -> None:
    plain.commit({"a.txt": "a\n"})
    a = _blob(plain, "a.txt")
    cache = MemoryDigestCache()
    cache.digests[a] = "not a digest"
    assert cached_digests(cache, [a]) == {}
    assert Git(plain.path).blob_sha256s([a], cache=cache) == {a: hashlib.sha256(b"a\n").hexdigest()}
    assert cache.digests[a] == hashlib.sha256(b"a\n").hexdigest()


def test_only_full_object_ids_reach_the_cache() -> None:
    cache = MemoryDigestCache()
    digest = hashlib.sha256(b"x").hexdigest()
    sha1, sha256 = "a" * 40, "b" * 64
    remember_digests(cache, {sha1: digest, sha256: digest, "abc123": digest, "A" * 40: digest})
    assert cache.digests == {sha1: digest, sha256: digest}
    assert [is_object_id(s) for s in (sha1, sha256, "a" * 41, "g" * 40, "HEAD")] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_a_fifo_git_config_ends_in_an_error_not_a_hang(tmp_path: Path) -> None:
    """Opening the repository reads its config through git, under our timeout."""
    repo = GitRepo(tmp_path / "r")
    config = repo.path / ".git" / "config"
    config.unlink()
    os.mkfifo(config)
    with pytest.raises(InfrastructureError, match="timed out"):
        Repository(repo.path, timeout_s=1)


def test_opening_tells_bare_repositories_subfolders_and_plain_folders_apart(
    tmp_path: Path,
) -> None:
    repo = GitRepo(tmp_path / "r")
    (repo.path / "sub").mkdir()
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "b.git")], check=True)
    (tmp_path / "plain").mkdir()
    cases = {
        tmp_path / "gone": "does not exist",
        tmp_path / "plain": "is not a git repository",
        tmp_path / "b.git" / "objects": "is not a git repository \\(it is inside",
        repo.path / "sub": "is not a git repository \\(it is inside",
    }
    for path, message in cases.items():
        with pytest.raises(InfrastructureError, match=message):
            Repository(path)
    opened = Repository(repo.path)
    assert (opened.root, opened.bare) == (repo.path.resolve(), False)
    bare = Repository(tmp_path / "b.git")  # a mirror: commits, no working tree
    assert (bare.root, bare.bare) == ((tmp_path / "b.git").resolve(), True)
    with pytest.raises(InfrastructureError, match="is a bare repository: no working tree"):
        bare.worktree_paths()


def _rewrite_loose(repo: GitRepo, oid: str, kind: bytes, data: bytes) -> None:
    target = repo.path / ".git" / "objects" / oid[:2] / oid[2:]
    target.chmod(0o644)
    target.write_bytes(zlib.compress(b"%s %d\0" % (kind, len(data)) + data))


def test_a_blob_whose_bytes_are_not_its_id_raises_object_corrupt(plain: GitRepo) -> None:
    plain.commit({"a.txt": "honest\n", "b.txt": "other\n"})
    oid = _blob(plain, "a.txt")
    _rewrite_loose(plain, oid, b"blob", b"forged, and longer\n")
    assert plain.git("cat-file", "blob", oid) == "forged, and longer"  # git does not check
    with Git(plain.path).cat_file([oid]) as batch, pytest.raises(ObjectCorrupt) as caught:
        batch.read(oid)
    assert (caught.value.oid, caught.value.kind) == (oid, "blob")
    assert caught.value.found != oid


def test_a_corrupt_blob_never_reaches_the_digest_cache(plain: GitRepo) -> None:
    plain.commit({"a.txt": "honest\n"})
    oid = _blob(plain, "a.txt")
    _rewrite_loose(plain, oid, b"blob", b"forged\n")
    cache = MemoryDigestCache()
    with pytest.raises(ObjectCorrupt):
        Git(plain.path).blob_sha256s([oid], cache=cache)
    assert cache.digests == {}


def test_a_corrupt_tree_read_raw_raises_object_corrupt(plain: GitRepo) -> None:
    plain.commit({"d/a.txt": "a\n", "b.txt": "b\n"})
    tree = plain.git("rev-parse", "HEAD:d")
    other = plain.git("rev-parse", "HEAD:b.txt")
    _rewrite_loose(plain, tree, b"tree", b"100644 a.txt\0" + bytes.fromhex(other))
    with pytest.raises(ObjectCorrupt):
        Git(plain.path).read_objects([(tree, "tree")])


def test_objects_of_a_sha256_repository_are_checked_with_sha256(tmp_path: Path) -> None:
    path = tmp_path / "r256"
    subprocess.run(["git", "init", "-q", "--object-format=sha256", str(path)], check=True)
    repo = GitRepo(path)
    repo.commit({"a.txt": "honest\n"})
    oid = _blob(repo, "a.txt")
    assert len(oid) == 64
    assert Git(path).read_objects([(oid, "blob")]) == [(oid, b"honest\n")]
    _rewrite_loose(repo, oid, b"blob", b"forged\n")
    with pytest.raises(ObjectCorrupt):
        Git(path).read_objects([(oid, "blob")])
