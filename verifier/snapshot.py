"""An isolated copy of a repository's head state, made without touching the repository.

Two modes, as in the report contract:

* commit mode (`head_commit` given): the blobs of the commit's tree, written
  byte for byte from `git ls-tree` and `git cat-file --batch`. We do not use
  `git archive`: it applies `.gitattributes` from the archived tree
  (`export-ignore` would let a commit hide a test file from the run,
  `export-subst` rewrites contents) and working-tree filters, so its files are
  not the committed bytes the changes check hashed.
* worktree mode (`head_commit` is None): the tracked files and the untracked
  files that are not ignored, as they are on disk (`git ls-files --cached
  --others --exclude-standard`); a tracked file deleted on disk is not copied.

Regular files keep their permission bits. A symbolic link is copied as a link
only when, in the copy, it resolves inside the copy; otherwise it is left out
and recorded in `SnapshotInfo.skipped`. No path outside the repository root is
ever opened. Every git command runs with `GIT_OPTIONAL_LOCKS=0` (no index
refresh), no inherited `GIT_*` variable, an argument list, `cwd=` the
repository and a timeout.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import BinaryIO, NoReturn

from verifier.errors import InfrastructureError
from verifier.repository import SAFE_CONFIG, git_environment

__all__ = ["SkippedPath", "SnapshotError", "SnapshotInfo", "materialize"]

DEFAULT_GIT_TIMEOUT_S = 120.0
_HEX = re.compile(r"[0-9a-fA-F]{4,64}")
_CHUNK = 1 << 20

# Writes one file's bytes to the open output and returns how many.
_Copier = Callable[[BinaryIO], int]


class SnapshotError(InfrastructureError):
    """The head state could not be copied (unknown commit, git failure, unreadable file)."""


@dataclass(frozen=True)
class SkippedPath:
    """A path of the head state that is not in the copy, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class SnapshotInfo:
    """What was copied: regular files and their total size, links, and what was left out."""

    mode: str  # "commit" or "worktree"
    commit: str | None
    files: int
    bytes: int
    symlinks: int
    skipped: tuple[SkippedPath, ...] = ()
    # SHA-256 of every regular file as copied, by path: what the tests will run on.
    digests: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


def materialize(
    repo_path: Path,
    head_commit: str | None,
    dest: Path,
    *,
    timeout_s: float = DEFAULT_GIT_TIMEOUT_S,
    max_bytes: int | None = None,
) -> SnapshotInfo:
    """Copy the state at `head_commit` (or the working tree when None) into `dest`.

    Raises `SnapshotError` when the files add up to more than `max_bytes`.
    """
    repo = _Git(repo_path, timeout_s)
    writer = _Writer(dest, max_bytes)
    if head_commit is None:
        _copy_worktree(repo, writer)
        commit = None
    else:
        commit = _resolve_commit(repo, head_commit)
        _copy_commit(repo, commit, writer)
    return writer.finish("commit" if commit else "worktree", commit)


def _resolve_commit(repo: _Git, head_commit: str) -> str:
    if not _HEX.fullmatch(head_commit):
        raise SnapshotError(f"head commit {head_commit!r} is not a hexadecimal commit id")
    out = repo.run("rev-parse", "--verify", "--quiet", f"{head_commit}^{{commit}}", check=False)
    if out is None:
        raise SnapshotError(f"commit {head_commit} does not exist in repository {str(repo.path)!r}")
    return out.decode("ascii").strip()


def _copy_commit(repo: _Git, commit: str, writer: _Writer) -> None:
    listing = repo.run("ls-tree", "-r", "-z", "--full-tree", commit)
    assert listing is not None
    blobs: list[tuple[str, str, bytes]] = []  # (mode, object id, path)
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, oid = meta.decode("ascii").split(" ")
        if kind != "blob":
            writer.skip(os.fsdecode(raw_path), f"{kind} entry (submodule), not copied")
            continue
        blobs.append((mode, oid, raw_path))
    with repo.cat_file() as objects:
        for mode, oid, raw_path in blobs:
            rel = os.fsdecode(raw_path)
            if mode == "120000":
                target = objects.read_all(oid)
                writer.add_symlink(rel, os.fsdecode(target))
            else:
                file_mode = 0o755 if mode == "100755" else 0o644
                writer.write_file(rel, file_mode, partial(objects.copy, oid))


def _copy_worktree(repo: _Git, writer: _Writer) -> None:
    listing = repo.run("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    assert listing is not None
    root = repo.path.resolve()
    seen: set[bytes] = set()
    for raw_path in listing.split(b"\0"):
        if not raw_path or raw_path in seen:
            continue
        seen.add(raw_path)
        rel = os.fsdecode(raw_path).rstrip("/")
        if not _safe_relative(rel):
            writer.skip(rel, "not a plain relative path")
            continue
        source = root / rel
        if not source.parent.resolve().is_relative_to(root):
            writer.skip(rel, "reached through a link leading outside the repository")
            continue
        try:
            info = os.lstat(source)
        except FileNotFoundError:
            continue  # a tracked file deleted in the working tree is not part of the state
        except OSError as exc:
            raise SnapshotError(f"cannot read {rel!r} in {str(root)!r}: {exc}") from None
        if stat.S_ISLNK(info.st_mode):
            writer.add_symlink(rel, os.readlink(source))
        elif stat.S_ISREG(info.st_mode):
            writer.write_file(rel, stat.S_IMODE(info.st_mode), _file_copier(source, rel))
        else:
            writer.skip(rel, "not a regular file or a link (nested repository?)")


def _file_copier(source: Path, rel: str) -> _Copier:
    def copy(out: BinaryIO) -> int:
        try:
            # No blocking open (a FIFO swapped in), no link, a regular file only.
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise SnapshotError(f"cannot read {rel!r}: {exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise SnapshotError(f"{rel!r} stopped being a regular file while it was copied")
        with os.fdopen(fd, "rb") as src:
            shutil.copyfileobj(src, out, _CHUNK)
            return src.tell()

    return copy


def _safe_relative(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)


class _HashingWriter:
    """A file opened for writing that hashes what goes through it."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        return self.raw.write(data)


class _Writer:
    """Creates the copy under `dest`; links are made last, then checked in place."""

    def __init__(self, dest: Path, max_bytes: int | None = None) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        self.dest = dest.resolve()
        self.max_bytes = max_bytes
        self.files = 0
        self.bytes = 0
        self.digests: dict[str, str] = {}
        self.links: list[tuple[str, str]] = []
        self.skipped: list[SkippedPath] = []

    def skip(self, rel: str, reason: str) -> None:
        self.skipped.append(SkippedPath(rel, reason))

    def write_file(self, rel: str, mode: int, copy: _Copier) -> None:
        if not _safe_relative(rel):
            self.skip(rel, "not a plain relative path")
            return
        target = self.dest / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except (FileExistsError, NotADirectoryError) as exc:
            self.skip(rel, f"clashes with another path of the copy: {exc.strerror}")
            return
        except OSError as exc:  # a name too long for this file system, say
            self.skip(rel, f"cannot be created here: {exc.strerror}")
            return
        with os.fdopen(fd, "wb") as raw:
            out = _HashingWriter(raw)
            self.bytes += copy(out)  # type: ignore[arg-type]
        if self.max_bytes is not None and self.bytes > self.max_bytes:
            raise SnapshotError(
                f"the head state is over {self.max_bytes} bytes (max_snapshot_bytes); "
                "not copied for the tests"
            )
        self.digests[rel] = out.sha256.hexdigest()
        os.chmod(target, mode)
        self.files += 1

    def add_symlink(self, rel: str, target: str) -> None:
        self.links.append((rel, target))

    def finish(self, mode: str, commit: str | None) -> SnapshotInfo:
        made = self._make_links()
        return SnapshotInfo(
            mode=mode,
            commit=commit,
            files=self.files,
            bytes=self.bytes,
            symlinks=len(made),
            digests=self.digests,
            skipped=tuple(self.skipped),
        )

    def _make_links(self) -> list[str]:
        made: list[str] = []
        for rel, target in self.links:
            if not _safe_relative(rel) or os.path.isabs(target):
                self.skip(rel, f"link to {target!r} leads outside the copy")
                continue
            link = self.dest / rel
            try:
                link.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target, link)
            except (FileExistsError, NotADirectoryError) as exc:
                self.skip(rel, f"clashes with another path of the copy: {exc.strerror}")
                continue
            made.append(rel)
        # A link may escape only through other links ("a -> ." then "b -> a/a/../.."),
        # so check where each one really leads, and again after every removal.
        removed = True
        while removed:
            removed = False
            for rel in list(made):
                link = self.dest / rel
                if not Path(os.path.realpath(link)).is_relative_to(self.dest):
                    target = os.readlink(link)
                    link.unlink()
                    made.remove(rel)
                    self.skip(rel, f"link to {target!r} leads outside the copy")
                    removed = True
        return made


class _Git:
    def __init__(self, path: Path, timeout_s: float) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.env = git_environment()

    def argv(self, *args: str) -> list[str]:
        return ["git", *SAFE_CONFIG, *args]

    def run(self, *args: str, check: bool = True) -> bytes | None:
        """stdout of a git command; None when it fails and `check` is False."""
        try:
            done = subprocess.run(
                self.argv(*args),
                cwd=self.path,
                env=self.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SnapshotError(
                f"git {args[0]} timed out after {self.timeout_s:g}s in {str(self.path)!r}"
            ) from None
        except OSError as exc:
            raise SnapshotError(f"cannot run git in {str(self.path)!r}: {exc}") from None
        if done.returncode == 0:
            return done.stdout
        if not check:
            return None
        stderr = done.stderr.decode("utf-8", "replace").strip()
        raise SnapshotError(
            f"git {args[0]} failed in {str(self.path)!r} (exit {done.returncode}): {stderr}"
        )

    def cat_file(self) -> _CatFile:
        return _CatFile(self)


class _CatFile:
    """One `git cat-file --batch` process, asked for one object at a time."""

    def __init__(self, git: _Git) -> None:
        self.git = git
        try:
            self.proc = subprocess.Popen(
                git.argv("cat-file", "--batch"),
                cwd=git.path,
                env=git.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise SnapshotError(f"cannot run git in {str(git.path)!r}: {exc}") from None
        self.timer = threading.Timer(git.timeout_s, self.proc.kill)
        self.timer.start()

    def __enter__(self) -> _CatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()

    def copy(self, oid: str, out: BinaryIO) -> int:
        """Write the blob `oid` to `out`; return its size."""
        size = self._request(oid)
        stdout = self.proc.stdout
        assert stdout is not None
        left = size
        while left:
            chunk = stdout.read(min(left, _CHUNK))
            if not chunk:
                self._broken(oid)
            out.write(chunk)
            left -= len(chunk)
        if stdout.read(1) != b"\n":
            self._broken(oid)
        return size

    def read_all(self, oid: str) -> bytes:
        size = self._request(oid)
        assert self.proc.stdout is not None
        data = self.proc.stdout.read(size + 1)
        if len(data) != size + 1:
            self._broken(oid)
        return data[:size]

    def _request(self, oid: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(oid.encode("ascii") + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._broken(oid)
        header = self.proc.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            self._broken(oid)
        return int(header[2])

    def _broken(self, oid: str) -> NoReturn:
        raise SnapshotError(
            f"git cat-file could not give object {oid} in {str(self.git.path)!r} "
            f"(missing object, or timed out after {self.git.timeout_s:g}s)"
        )
