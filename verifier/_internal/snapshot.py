"""An isolated copy of a repository's head state, made without touching the repository.

Two modes, as in the report contract:

* commit mode (`head_commit` given): the blobs of the commit's tree, written
  byte for byte from `git ls-tree` and one `git cat-file --batch` fed every
  blob id at once. We do not use `git archive`: it applies `.gitattributes`
  from the archived tree (`export-ignore` would let a commit hide a test file
  from the run, `export-subst` rewrites contents) and working-tree filters, so
  its files are not the committed bytes the changes check hashed.
* worktree mode (`head_commit` is None): the tracked files and the untracked
  files that are not ignored, as they are on disk (`git ls-files --cached
  --others --exclude-standard`); a tracked file deleted on disk is not copied.

Regular files keep their permission bits. A symbolic link is copied as a link
only when, in the copy, it resolves inside the copy; otherwise it is left out
and recorded in `SnapshotInfo.skipped`. A path that `verifier._internal.paths.unsafe_reason`
refuses (``..``, a ``.git`` segment...) is left out too. No path outside the
repository root is ever opened, and the size and file-count caps are checked
before each file is written: a tree of 200,000 empty files is refused at the
cap, not copied whole first. Every blob is checked against its id as it is
copied (`verifier._internal.git.CatFile.stream`): a mismatch raises
`ObjectCorrupt`, naming the path. Git runs through `verifier._internal.git`
(argument list, `cwd=` the repository, a timeout that kills, no inherited
`GIT_*`, no index refresh).
`temp_parent` picks a folder in memory for the copy when there is room.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from verifier._internal.git import (
    GIT_TIMEOUT_S,
    BlobDigestCache,
    Git,
    cached_digests,
    remember_digests,
)
from verifier._internal.paths import unsafe_reason, worktree_state
from verifier.errors import InfrastructureError, ObjectCorrupt

__all__ = ["SkippedPath", "SnapshotError", "SnapshotInfo", "materialize", "temp_parent"]

DEFAULT_GIT_TIMEOUT_S = GIT_TIMEOUT_S
_HEX = re.compile(r"[0-9a-fA-F]{4,64}")
_CHUNK = 1 << 20
_MODE_LINK = "120000"
# A link target longer than this is not a path (PATH_MAX on Linux): not read into memory.
_MAX_LINK_TARGET = 4096
#: Where `temp_parent` looks for a file system in memory.
SHM = Path("/dev/shm")
# Room left free in that file system beyond the copy: the tests write there too.
_SHM_HEADROOM = 256 << 20

# Streams one file's bytes into the sink it is given; returns how many.
_Filler = Callable[[Callable[[bytes], object]], int]


class SnapshotError(InfrastructureError):
    """The head state could not be copied (unknown commit, git failure, unreadable file)."""

    code = "snapshot"


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
    # Worktree mode: every file and link as read (`verifier._internal.paths.worktree_state`:
    # mode and SHA-256, or link target), copied or not, to hold against what the
    # changes check read (`HeadState.files`).
    entries: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


def temp_parent(need_bytes: int | None = None, *, shm: Path = SHM) -> Path | None:
    """A folder in memory (tmpfs) to hold a copy of up to `need_bytes`, or None.

    Writing 10,000 small files to a disk costs more than reading them from git;
    in memory it costs little. Pass the result as ``dir=`` of
    `tempfile.TemporaryDirectory`; None means the system's temp folder. The
    folder must exist, be writable and keep `need_bytes` (the size cap, say)
    plus some room free.
    """
    try:
        if not shm.is_dir() or shm.is_symlink() or not os.access(shm, os.W_OK | os.X_OK):
            return None
        vfs = os.statvfs(shm)
    except OSError:
        return None
    return shm if vfs.f_bavail * vfs.f_frsize >= (need_bytes or 0) + _SHM_HEADROOM else None


def materialize(
    repo_path: Path,
    head_commit: str | None,
    dest: Path,
    *,
    timeout_s: float = GIT_TIMEOUT_S,
    max_bytes: int | None = None,
    cache: BlobDigestCache | None = None,
    max_files: int | None = None,
) -> SnapshotInfo:
    """Copy the state at `head_commit` (or the working tree when None) into `dest`.

    Raises `SnapshotError` when the files add up to more than `max_bytes`, or
    the listing holds more than `max_files` files and links, before the file
    that would cross either cap is written. `cache` (blob id ->
    SHA-256, as the changes check fills it) spares hashing the blobs it knows,
    and learns the others.
    """
    repo = Git(repo_path, timeout_s=timeout_s, error=SnapshotError)
    writer = _Writer(dest, max_bytes, max_files)
    if head_commit is None:
        _copy_worktree(repo, writer)
        commit = None
    else:
        commit = _resolve_commit(repo, head_commit)
        _copy_commit(repo, commit, writer, cache)
    return writer.finish("commit" if commit else "worktree", commit)


def _resolve_commit(repo: Git, head_commit: str) -> str:
    if not _HEX.fullmatch(head_commit):
        raise SnapshotError(f"head commit {head_commit!r} is not a hexadecimal commit id")
    done = repo.call("rev-parse", "--verify", "--quiet", f"{head_commit}^{{commit}}")
    if done.returncode != 0:
        raise SnapshotError(f"commit {head_commit} does not exist in repository {str(repo.cwd)!r}")
    return done.stdout.decode("ascii").strip()


def _copy_commit(repo: Git, commit: str, writer: _Writer, cache: BlobDigestCache | None) -> None:
    listing = repo.run("ls-tree", "-r", "-z", "--full-tree", commit)
    links: list[tuple[str, str]] = []  # (object id, path)
    files: list[tuple[str, int, str]] = []  # (object id, permission bits, path)
    # What a reader of the listing that keeps the last entry of a path (the changes
    # check) takes each path to be: the copy must hold the same.
    listed: dict[str, str] = {}
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, oid = meta.decode("ascii").split(" ")
        rel = os.fsdecode(raw_path)
        listed[rel] = oid
        if kind == "blob":
            writer.count()  # before any file is written: the listing alone can be too long
        if kind != "blob":
            writer.skip(rel, f"{kind} entry (submodule), not copied")
        elif (reason := unsafe_reason(rel)) is not None:
            writer.skip(rel, f"not a plain relative path: {reason}")
        elif mode == _MODE_LINK:
            links.append((oid, rel))
        else:
            files.append((oid, 0o755 if mode == "100755" else 0o644, rel))
    known = cached_digests(cache, {oid for oid, _, _ in files})
    # One batch for every blob, links first: no round trip per blob.
    learned: dict[str, str] = {}
    rel = ""
    try:
        with repo.cat_file([oid for oid, _ in links] + [oid for oid, _, _ in files]) as batch:
            for oid, rel in links:
                if batch.header(oid) > _MAX_LINK_TARGET:
                    batch.stream(oid, _discard)
                    writer.skip(rel, "link target longer than any path")
                else:
                    writer.add_symlink(rel, os.fsdecode(batch.read(oid)))
            for oid, file_mode, rel in files:
                size = batch.header(oid)
                digest = writer.write_file(
                    rel, file_mode, size, partial(batch.stream, oid), known.get(oid), drain=True
                )
                if digest is not None and oid not in known:
                    learned[oid] = digest
    except ObjectCorrupt as exc:  # the copy is void: the caller removes it
        raise exc.at(rel) from None
    remember_digests(cache, learned)
    _check_commit_copy(commit, listed, files, writer.digests, {**known, **learned})


def _check_commit_copy(
    commit: str,
    listed: Mapping[str, str],
    files: list[tuple[str, int, str]],
    copied: Mapping[str, str],
    blob_digests: Mapping[str, str],
) -> None:
    """Each regular file of the copy holds the blob the tree lists for its path, or raise.

    Checked after the copy is made, on the copy's own digests: a tree that lists
    a path twice (git would refuse it; ``hash-object --literally`` writes it)
    has one entry hashed by the changes check and the other in the copy.
    """
    for oid, _, rel in files:
        if rel not in copied:
            continue  # skipped, and recorded as skipped
        expected = blob_digests.get(listed.get(rel, ""))
        if expected is None or copied[rel] != expected:
            raise SnapshotError(
                f"the copy of {rel!r} does not hold the blob commit {commit} lists for it "
                f"(copied {oid}, listed {listed.get(rel)}): the tree names the path more "
                "than once"
            )


def _discard(_chunk: bytes) -> None:
    return None


def _copy_worktree(repo: Git, writer: _Writer) -> None:
    listing = repo.run("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    root = repo.cwd.resolve()
    seen: set[bytes] = set()
    for raw_path in listing.split(b"\0"):
        if not raw_path or raw_path in seen:
            continue
        seen.add(raw_path)
        rel = os.fsdecode(raw_path).rstrip("/")
        reason = unsafe_reason(rel)
        if reason is not None:
            writer.skip(rel, f"not a plain relative path: {reason}")
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
        writer.count()  # before this one is read or written
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(source)
            writer.entries[rel] = worktree_state(_MODE_LINK, target)
            writer.add_symlink(rel, target)
        elif stat.S_ISREG(info.st_mode):
            digest = writer.write_file(
                rel, stat.S_IMODE(info.st_mode), info.st_size, _file_filler(source, rel)
            )
            if digest is not None:
                # The mode as git would record it: the owner's execute bit, as the changes check.
                executable = info.st_mode & stat.S_IXUSR
                writer.entries[rel] = worktree_state("100755" if executable else "100644", digest)
        else:
            writer.skip(rel, "not a regular file or a link (nested repository?)")


def _file_filler(source: Path, rel: str) -> _Filler:
    def fill(sink: Callable[[bytes], object]) -> int:
        try:
            # No blocking open (a FIFO swapped in), no link, a regular file only.
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise SnapshotError(f"cannot read {rel!r}: {exc}") from None
        with os.fdopen(fd, "rb") as src:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SnapshotError(f"{rel!r} stopped being a regular file while it was copied")
            total = 0
            while chunk := src.read(_CHUNK):
                sink(chunk)
                total += len(chunk)
            return total

    return fill


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Writer:
    """Creates the copy under `dest`; links are made last, then checked in place."""

    def __init__(
        self, dest: Path, max_bytes: int | None = None, max_files: int | None = None
    ) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        self.dest = dest.resolve()
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.listed = 0  # entries of the listing counted against `max_files`
        self.files = 0
        self.bytes = 0
        self.digests: dict[str, str] = {}
        self.entries: dict[str, str] = {}
        self.links: list[tuple[str, str]] = []
        self.skipped: list[SkippedPath] = []
        self._folders: set[str] = {""}  # made already, relative to `dest`

    def skip(self, rel: str, reason: str) -> None:
        self.skipped.append(SkippedPath(rel, reason))

    def count(self) -> None:
        """Count one more entry of the listing; raise once there are more than `max_files`.

        Counted as the listing is read, so nothing past the cap is written: in
        commit mode the whole listing before the first file, in worktree mode
        each path before it is opened. A file or link left out later still
        counts.
        """
        self.listed += 1
        if self.max_files is not None and self.listed > self.max_files:
            raise SnapshotError(
                f"the head state holds more than {self.max_files} files "
                "(max_snapshot_files); not copied for the tests"
            )

    def _over(self) -> SnapshotError:
        return SnapshotError(
            f"the head state is over {self.max_bytes} bytes (max_snapshot_bytes); "
            "not copied for the tests"
        )

    def _folder(self, rel: str) -> None:
        """Make the folders on the way to `rel` (only ours: links are made last)."""
        parent = rel.rpartition("/")[0]
        if parent not in self._folders:
            (self.dest / parent).mkdir(parents=True, exist_ok=True)
            self._folders.add(parent)

    def write_file(
        self,
        rel: str,
        mode: int,
        size: int,
        fill: _Filler,
        sha256: str | None = None,
        *,
        drain: bool = False,
    ) -> str | None:
        """Write `size` bytes from `fill` at `rel`; the file's SHA-256, None when skipped.

        `rel` has passed `unsafe_reason`. The cap is checked with `size` before
        anything is written, and again with what was really written. With
        `drain`, a skipped file's bytes are still read from `fill` (a batch
        reader must move on to the next record). `sha256`, when known, is taken
        instead of hashing.
        """
        if self.max_bytes is not None and self.bytes + size > self.max_bytes:
            raise self._over()
        target = self.dest / rel
        try:
            self._folder(rel)
            fd = os.open(
                target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
        except (FileExistsError, NotADirectoryError) as exc:
            if drain:
                fill(_discard)
            self.skip(rel, f"clashes with another path of the copy: {exc.strerror}")
            return None
        except OSError as exc:  # a name too long for this file system, say
            if drain:
                fill(_discard)
            self.skip(rel, f"cannot be created here: {exc.strerror}")
            return None
        try:
            os.fchmod(fd, mode)
            if sha256 is None:
                digest = hashlib.sha256()

                def sink(chunk: bytes) -> None:
                    digest.update(chunk)
                    _write_all(fd, chunk)

                written = fill(sink)
                sha256 = digest.hexdigest()
            else:
                written = fill(partial(_write_all, fd))
        finally:
            os.close(fd)
        self.bytes += written
        if self.max_bytes is not None and self.bytes > self.max_bytes:
            raise self._over()  # a working-tree file that grew while it was copied
        self.digests[rel] = sha256
        self.files += 1
        return sha256

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
            entries=self.entries,
            skipped=tuple(self.skipped),
        )

    def _make_links(self) -> list[str]:
        made: list[str] = []
        for rel, target in self.links:
            if unsafe_reason(rel) is not None or os.path.isabs(target):
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
