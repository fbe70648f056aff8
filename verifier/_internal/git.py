"""Git plumbing: one hardened way to run git, one streaming blob reader. Internal and unstable.

`verifier._internal.repository` (the changes check's reads), `verifier._internal.snapshot` (the
copy for the tests) and `verifier._internal.mirror` (fetches into a worker's mirror) are
its users; nothing else should import it, and its names may change without
notice.

The repository is the agent's work, so git is run as on untrusted data:

* an argument list, ``cwd=`` the repository, its own process group, and a
  watchdog that kills the whole group when `timeout_s` runs out (a hung git,
  or a program it started, cannot hold the verifier), cut to the deadline of
  the check that made the `Git` (`verifier._internal.deadline`);
* no inherited ``GIT_*`` variable (``GIT_DIR`` or ``GIT_INDEX_FILE`` would point
  it elsewhere), ``GIT_OPTIONAL_LOCKS=0`` (no index refresh, nothing written),
  ``GIT_NO_REPLACE_OBJECTS=1`` (``refs/replace`` would swap the commit we
  check), ``GIT_GRAFT_FILE=/dev/null`` (``.git/info/grafts`` would rewrite a
  commit's parents, and so what is an ancestor of the trusted ref), no prompt;
* `SAFE_CONFIG` ``-c`` options, which outrank the repository's own
  configuration, deny it the programs it could start (``core.fsmonitor``) and
  the shortcuts it could forge (``core.commitGraph``: a commit-graph file the
  agent wrote could claim any ancestry).

Blobs are read by one ``git cat-file --batch`` fed every object id at once (from
a temp file, so neither side waits on the other), each record streamed in
chunks: memory stays bounded whatever the blob sizes.

Every object read through `CatFile` is checked against its id while it
streams: git's id is the hash of ``"<kind> <size>\0"`` and the bytes (SHA-1,
or SHA-256 in a repository of ``extensions.objectFormat=sha256``: told by the
id's length), and git itself does not check it when it serves an object. A
loose object rewritten in place, or an alternate object store holding other
bytes under an id, raises `ObjectCorrupt` when the record ends, before any
caller takes the bytes as the object's (a digest is handed to a cache only
after it).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Protocol

from verifier._internal.deadline import check_deadline
from verifier.errors import InfrastructureError, ObjectCorrupt

#: The one timeout of a git command, in seconds, unless a caller passes its own.
GIT_TIMEOUT_S = 120.0
# `-c` settings that outrank the repository's own configuration.
SAFE_CONFIG = (
    "-c", "core.quotepath=false",
    "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false",
    "-c", "core.commitGraph=false",
)  # fmt: skip
CHUNK = 1 << 20
#: `Git.blob_sha256s` splits at least this many blobs between this many processes.
BATCH_SPLIT_MIN = 64
BATCH_PROCESSES = 2
#: `CatFile.read_objects` writes this many names at a time (well under 4 KiB).
ASK_CHUNK = 40
_OBJECT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ID_LENGTHS = frozenset((40, 64))
_SHA256_LENGTH = frozenset((64,))
_HEX_LINES = b"0123456789abcdef\n"
_Stream = int | IO[bytes]


def object_hasher(oid: str, kind: str, size: int) -> hashlib._Hash:
    """A hash of git's object header for `kind` and `size`, in the object format of `oid`.

    Fed the object's bytes, its hex digest is `oid` when git served the object
    that `oid` names.
    """
    algorithm = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
    return algorithm(b"%s %d\0" % (kind.encode("ascii"), size))


def git_environment() -> dict[str, str]:
    """Our environment for git: no inherited ``GIT_*``, no replace refs, no grafts, no prompts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_GRAFT_FILE=os.devnull,
    )
    return env


def is_object_id(text: str) -> bool:
    """Whether `text` is a full object id as git prints it: SHA-1 (40) or SHA-256 (64) hex."""
    return _OBJECT_ID.fullmatch(text) is not None


def _is_sha256(text: str) -> bool:
    return _SHA256.fullmatch(text) is not None


class BlobDigestCache(Protocol):
    """Blob id -> SHA-256 of the blob's bytes, kept across checks.

    A git blob id is the hash of the blob's content, so a digest cached for an
    id holds in every repository: re-verifying a session, or another session on
    the same base, reads from git only the blobs it has not seen.
    """

    def get_many(self, shas: Collection[str]) -> dict[str, str]:
        """The digests known for any of `shas` (the others are simply absent)."""
        ...

    def put_many(self, digests: Mapping[str, str]) -> None:
        """Remember `digests` (blob id -> SHA-256 hex)."""
        ...


class MemoryDigestCache:
    """A `BlobDigestCache` in a dict, for one process (tests, benchmarks, a worker)."""

    def __init__(self) -> None:
        self.digests: dict[str, str] = {}

    def get_many(self, shas: Collection[str]) -> dict[str, str]:
        return {sha: self.digests[sha] for sha in shas if sha in self.digests}

    def put_many(self, digests: Mapping[str, str]) -> None:
        self.digests.update(digests)


def _all_hex(texts: Collection[str], lengths: frozenset[int]) -> bool:
    """Whether every one of `texts` is lowercase hex of one of `lengths` (ids, digests).

    A few passes in C over the texts joined by newlines, for 1,000s of them:
    nothing but hex and newlines, the newlines exactly the joins (so no text
    holds one), and every length allowed.
    """
    joined = "\n".join(texts)
    return (
        joined.isascii()
        and not joined.encode("ascii").translate(None, _HEX_LINES)
        and joined.count("\n") == max(len(texts) - 1, 0)
        and set(map(len, texts)) <= lengths
    )


def cached_digests(cache: BlobDigestCache | None, shas: Collection[str]) -> dict[str, str]:
    """What `cache` knows of `shas`, keeping only well-formed ids and digests.

    The common case, every id and digest well formed, is told by a few passes
    in C (`_all_hex`) rather than one per id.
    """
    if cache is None:
        return {}
    asked = list(shas) if _all_hex(shas, _ID_LENGTHS) else [s for s in shas if is_object_id(s)]
    if not asked:
        return {}
    wanted = set(asked)
    found = cache.get_many(asked)
    if found.keys() <= wanted and _all_hex(found.values(), _SHA256_LENGTH):
        return dict(found)
    return {sha: digest for sha, digest in found.items() if sha in wanted and _is_sha256(digest)}


def remember_digests(cache: BlobDigestCache | None, digests: Mapping[str, str]) -> None:
    """Hand `digests` we computed to `cache`, for full object ids only."""
    if cache is None:
        return
    kept = {sha: d for sha, d in digests.items() if is_object_id(sha)}
    if kept:
        cache.put_many(kept)


class _Process(subprocess.Popen[bytes]):
    """A git process whose timed wait sleeps until git exits, not in steps.

    Popen's timed wait (``communicate`` with a timeout ends in one) polls with
    sleeps of 1 ms, 2 ms...; git closes its output a moment before it exits,
    so each command would lose a millisecond or more. A pidfd is readable the
    moment the process exits: one ``poll`` on it, under the same timeout.
    """

    def wait(self, timeout: float | None = None) -> int:
        if timeout is not None and self.returncode is None:
            _await_exit(self, timeout)
        return super().wait(timeout)


def _await_exit(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Return when `proc` has exited (not yet reaped); raise ``TimeoutExpired`` after `timeout`."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return  # no pidfd here: Popen's own polling does the waiting
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        exited = poller.poll(max(0, math.ceil(timeout * 1000)))
    finally:
        os.close(pidfd)
    if not exited:
        raise subprocess.TimeoutExpired(proc.args, timeout)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill git and whatever it started (its process group), if git still runs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


class _Watchdog:
    """Kills a process's whole group when `timeout_s` runs out; says whether it did."""

    def __init__(self, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
        self.proc = proc
        self.fired = False
        self._timer = threading.Timer(timeout_s, self._kill)
        self._timer.daemon = True
        self._timer.start()

    def _kill(self) -> None:
        self.fired = True
        _kill_group(self.proc)

    def kill(self) -> None:
        _kill_group(self.proc)

    def cancel(self) -> None:
        self._timer.cancel()


class Git:
    """Git commands in one repository, hardened; failures raise `error`."""

    def __init__(
        self,
        cwd: Path,
        *,
        timeout_s: float = GIT_TIMEOUT_S,
        error: type[InfrastructureError] = InfrastructureError,
    ) -> None:
        self.cwd = cwd
        self._timeout_s = timeout_s
        # The check's deadline when one runs (`verifier._internal.deadline`): every command
        # of this object, in whichever thread, stops by then.
        self.deadline = check_deadline()
        self.error = error
        self.env = git_environment()

    @property
    def timeout_s(self) -> float:
        """Seconds a command started now may take: the timeout, cut to the deadline."""
        if self.deadline is None:
            return self._timeout_s
        return max(0.0, min(self._timeout_s, self.deadline - time.monotonic()))

    def _spawn(
        self, args: Sequence[str], stdin: _Stream, stdout: _Stream, stderr: _Stream
    ) -> subprocess.Popen[bytes]:
        try:
            return _Process(
                ["git", *SAFE_CONFIG, *args],
                cwd=self.cwd,
                env=self.env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,  # its own process group, killed whole
            )
        except OSError as exc:
            raise self.error(f"cannot run git in {str(self.cwd)!r}: {exc}") from None

    def _timed_out(self, what: str) -> InfrastructureError:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return self.error(f"git {what} stopped at the check's deadline in {str(self.cwd)!r}")
        return self.error(f"git {what} timed out after {self._timeout_s:g}s in {str(self.cwd)!r}")

    def call(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """Run ``git args``; its exit code is the caller's to judge."""
        proc = self._spawn(
            args,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = proc.communicate(stdin, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise self._timed_out(args[0]) from None
        finally:
            _kill_group(proc)  # an exception half-way: git must not outlive the call
            proc.wait()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def run(self, *args: str, stdin: bytes | None = None) -> bytes:
        """stdout of ``git args``; raises `error` when git fails."""
        done = self.call(*args, stdin=stdin)
        if done.returncode != 0:
            raise self._failed(args[0], done.returncode, done.stderr)
        return done.stdout

    def _failed(self, what: str, code: int, stderr: bytes) -> InfrastructureError:
        shown = stderr.decode("utf-8", "replace").strip()
        return self.error(f"git {what} failed in {str(self.cwd)!r} (exit {code}): {shown}")

    def run_many(self, *commands: Sequence[str]) -> list[bytes]:
        """stdout of each git command, run at the same time; raises `error` if any fails.

        Commands whose output needs no input (two ``ls-tree``, say): started
        together, they overlap on two cores, and the timeout covers them all.
        """
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for args in commands:
                procs.append(
                    self._spawn(
                        args,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    )
                )
            deadline = time.monotonic() + self.timeout_s
            outputs: list[bytes] = []
            for args, proc in zip(commands, procs, strict=True):
                try:
                    out, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise self._timed_out(args[0]) from None
                if proc.returncode != 0:
                    raise self._failed(args[0], proc.returncode, err)
                outputs.append(out)
            return outputs
        finally:
            for proc in procs:
                _kill_group(proc)
                proc.communicate()

    def cat_file(self, ids: Sequence[str]) -> CatFile:
        """A ``git cat-file --batch`` that will give the blobs `ids`, in that order."""
        return CatFile(self, ids)

    def object_reader(self) -> CatFile:
        """A ``git cat-file --batch`` asked in rounds (`CatFile.read_objects`): a walk of trees."""
        return CatFile(self, None)

    def read_objects(self, requests: Sequence[tuple[str, str]]) -> list[tuple[str, bytes]]:
        """Each requested object's id and raw bytes, in one ``git cat-file --batch``.

        A request is (name, kind): a full object id, or an expression of ours
        such as ``<commit>^{tree}``, and the kind the object must be (trees and
        commits: small objects, read whole; blobs are streamed by `cat_file`).
        """
        if not requests:
            return []
        names = [name for name, _ in requests]
        with CatFile(self, names) as batch:
            found: list[tuple[str, bytes]] = []
            for name, kind in requests:
                batch.header(name, kind)
                oid = batch.last_id
                found.append((oid, batch.read(name)))
            return found

    def blob_sha256s(
        self, *runs: Sequence[str], cache: BlobDigestCache | None = None
    ) -> dict[str, str]:
        """The SHA-256 of each blob's raw bytes: blob id -> hex digest.

        Each of `runs` lists blob ids in a tree's path order (the claimed files
        at base, say, then at head). Blobs `cache` knows are not read; the others
        are read by ``git cat-file --batch`` in that order (a tree's blobs lie
        together in a pack; sorted by id, every read would seek) and handed to
        `cache`. From `BATCH_SPLIT_MIN` blobs on, they are split between
        `BATCH_PROCESSES` batches read by as many threads, since git inflates and
        we hash in parallel (hashlib and pipe reads release the GIL): batch i
        takes the i-th slice of every run, so a file's versions, which a pack
        stores as deltas of one another, are inflated by the same git.
        """
        digests = cached_digests(cache, [sha for run in runs for sha in run])
        todo = [[sha for sha in run if sha not in digests] for run in runs]
        total = sum(map(len, todo))
        if total == 0:
            return digests
        processes = 1 if total < BATCH_SPLIT_MIN else BATCH_PROCESSES
        parts: list[list[str]] = [[] for _ in range(processes)]
        for run in todo:
            step = -(-len(run) // processes)
            for i, part in enumerate(parts):
                part.extend(run[i * step : (i + 1) * step])
        # Each id once, in the first batch that lists it.
        seen: set[str] = set()
        for part in parts:
            part[:] = [sha for sha in dict.fromkeys(part) if sha not in seen]
            seen.update(part)
        computed: dict[str, str] = {}
        if processes == 1:
            computed = self._hash_batch(parts[0])
        else:
            with ThreadPoolExecutor(processes, thread_name_prefix="cat-file") as pool:
                for part_digests in pool.map(self._hash_batch, parts):
                    computed.update(part_digests)
        remember_digests(cache, computed)
        digests.update(computed)
        return digests

    def _hash_batch(self, ids: Sequence[str]) -> dict[str, str]:
        digests: dict[str, str] = {}
        with self.cat_file(ids) as batch:
            for oid in ids:
                digest = hashlib.sha256()
                batch.stream(oid, digest.update)
                digests[oid] = digest.hexdigest()
        return digests


class CatFile:
    """One ``git cat-file --batch`` fed every id at once; its records are read in order.

    Use as a context manager; for each id of `ids`, in order, call `header`
    then `stream` (or `read`) once. Leaving early stops git.
    """

    def __init__(self, git: Git, ids: Sequence[str] | None) -> None:
        """`ids` None: git waits for the names `ask` gives it, round after round."""
        self.git = git
        self.last_id = ""  # the object id of the last header read
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        try:
            if ids is None:
                self._proc = git._spawn(
                    ("cat-file", "--batch"),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=self._errors,
                )
            else:
                with tempfile.TemporaryFile() as request:
                    request.write("".join(f"{oid}\n" for oid in ids).encode("ascii"))
                    request.seek(0)
                    self._proc = git._spawn(
                        ("cat-file", "--batch"),
                        stdin=request,
                        stdout=subprocess.PIPE,
                        stderr=self._errors,
                    )
        except BaseException:
            self._errors.close()
            raise
        assert self._proc.stdout is not None
        self._out: IO[bytes] = self._proc.stdout
        self._watchdog = _Watchdog(self._proc, git.timeout_s)
        self._pending: tuple[str, int, str] | None = None  # (id, size, kind) of a header read

    def __enter__(self) -> CatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._watchdog.cancel()
        self._watchdog.kill()  # done reading, or stopped early: git must stop too
        self._proc.wait()
        self._out.close()
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        self._errors.close()

    def read_objects(self, requests: Sequence[tuple[str, str]]) -> list[tuple[str, bytes]]:
        """`Git.read_objects` asked of this git, which `ids` None left waiting.

        The names go ``ASK_CHUNK`` at a time, each chunk's records read before
        the next is written: a chunk fits a pipe's buffer, so neither side
        waits on the other whatever the records' sizes.
        """
        stdin = self._proc.stdin
        assert stdin is not None, "a CatFile given its ids reads no more"
        found: list[tuple[str, bytes]] = []
        for at in range(0, len(requests), ASK_CHUNK):
            chunk = requests[at : at + ASK_CHUNK]
            try:
                stdin.write("".join(f"{name}\n" for name, _ in chunk).encode("ascii"))
                stdin.flush()
            except (BrokenPipeError, ValueError):
                raise self._broken("git stopped reading its requests") from None
            for name, kind in chunk:
                self.header(name, kind)
                found.append((self.last_id, self.read(name)))
        return found

    def header(self, oid: str, kind: str = "blob") -> int:
        """The size of the next record, which must be the object `oid`, of `kind`.

        `oid` may also be an expression of ours (``<commit>^{tree}``): then the
        record names the object it resolved to (`last_id`).
        """
        line = self._out.readline()
        fields = line.split()
        if fields[1:] == [b"missing"]:
            raise self.git.error(f"git cat-file: object {oid} is missing from the repository")
        named = len(fields) == 3 and (fields[0] == oid.encode("ascii") or not is_object_id(oid))
        if not named or fields[1] != kind.encode("ascii"):
            shown = line.decode("utf-8", "replace").strip() or "end of output"
            raise self._broken(f"expected {kind} {oid}, got {shown!r}")
        self.last_id = fields[0].decode("ascii")
        size = int(fields[2])
        self._pending = (self.last_id, size, kind)
        return size

    def stream(self, oid: str, sink: Callable[[bytes], object]) -> int:
        """Hand the object `oid`'s bytes to `sink` in chunks; its size.

        The bytes are hashed as they pass (`object_hasher`): when they do not
        hash to the object's id, `ObjectCorrupt` is raised once the record
        ends, after `sink` has seen them; whatever `sink` made of them is void.
        """
        if self._pending is None:
            self.header(oid)
        assert self._pending is not None
        named, size, kind = self._pending
        self._pending = None
        digest = object_hasher(named, kind, size)
        update = digest.update
        left = size
        read = self._out.read
        while left:
            chunk = read(min(left, CHUNK))
            if not chunk:
                raise self._broken(f"object {oid} is cut short")
            update(chunk)
            sink(chunk)
            left -= len(chunk)
        if read(1) != b"\n":  # the newline that ends every record
            raise self._broken(f"object {oid} is not followed by a newline")
        if digest.hexdigest() != named:
            raise ObjectCorrupt(named, kind, digest.hexdigest())
        return size

    def read(self, oid: str) -> bytes:
        """The object `oid`'s bytes, whole, checked (`stream`): for small objects (link targets)."""
        parts: list[bytes] = []
        self.stream(oid, parts.append)
        return b"".join(parts)

    def _broken(self, what: str) -> InfrastructureError:
        if self._watchdog.fired:
            return self.git._timed_out("cat-file")
        self._watchdog.kill()
        self._proc.wait()
        self._errors.seek(0)
        stderr = self._errors.read(2000).decode("utf-8", "replace").strip()
        return self.git.error(
            f"git cat-file in {str(self.git.cwd)!r}: {what}" + (f" ({stderr})" if stderr else "")
        )
