"""Git plumbing: one hardened way to run git, one streaming blob reader. Internal and unstable.

`verifier.repository` (the changes check's reads) and `verifier.snapshot` (the
copy for the tests) are its users; nothing else should import it, and its
names may change without notice.

The repository is the agent's work, so git is run as on untrusted data:

* an argument list, ``cwd=`` the repository, its own process group, and a
  watchdog that kills the whole group when `timeout_s` runs out (a hung git,
  or a program it started, cannot hold the verifier);
* no inherited ``GIT_*`` variable (``GIT_DIR`` or ``GIT_INDEX_FILE`` would point
  it elsewhere), ``GIT_OPTIONAL_LOCKS=0`` (no index refresh, nothing written),
  ``GIT_NO_REPLACE_OBJECTS=1`` (``refs/replace`` would swap the commit we
  check), no prompt;
* `SAFE_CONFIG` ``-c`` options, which outrank the repository's own
  configuration, deny it the programs it could start (``core.fsmonitor``).

Blobs are read by one ``git cat-file --batch`` fed every object id at once (from
a temp file, so neither side waits on the other), each record streamed in
chunks: memory stays bounded whatever the blob sizes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Protocol

from verifier.errors import InfrastructureError

#: The one timeout of a git command, in seconds, unless a caller passes its own.
GIT_TIMEOUT_S = 120.0
# `-c` settings that outrank the repository's own configuration.
SAFE_CONFIG = (
    "-c", "core.quotepath=false",
    "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false",
)  # fmt: skip
CHUNK = 1 << 20
#: `Git.blob_sha256s` splits at least this many blobs between this many processes.
BATCH_SPLIT_MIN = 64
BATCH_PROCESSES = 2
_HEX = frozenset("0123456789abcdef")
_Stream = int | IO[bytes]


def git_environment() -> dict[str, str]:
    """Our environment for git: no inherited ``GIT_*``, no replace refs, no prompts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", GIT_NO_REPLACE_OBJECTS="1")
    return env


def is_object_id(text: str) -> bool:
    """Whether `text` is a full object id as git prints it: SHA-1 (40) or SHA-256 (64) hex."""
    return len(text) in (40, 64) and _HEX.issuperset(text)


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and _HEX.issuperset(text)


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


def cached_digests(cache: BlobDigestCache | None, shas: Collection[str]) -> dict[str, str]:
    """What `cache` knows of `shas`, keeping only well-formed ids and digests."""
    if cache is None:
        return {}
    asked = [sha for sha in shas if is_object_id(sha)]
    if not asked:
        return {}
    wanted = set(asked)
    return {
        sha: digest
        for sha, digest in cache.get_many(asked).items()
        if sha in wanted and _is_sha256(digest)
    }


def remember_digests(cache: BlobDigestCache | None, digests: Mapping[str, str]) -> None:
    """Hand `digests` we computed to `cache`, for full object ids only."""
    if cache is None:
        return
    kept = {sha: d for sha, d in digests.items() if is_object_id(sha)}
    if kept:
        cache.put_many(kept)


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
        self.kill()

    def kill(self) -> None:
        """Kill git and whatever it started, if still running."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

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
        self.timeout_s = timeout_s
        self.error = error
        self.env = git_environment()

    def _spawn(
        self, args: Sequence[str], stdin: _Stream, stdout: _Stream, stderr: _Stream
    ) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
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
        return self.error(f"git {what} timed out after {self.timeout_s:g}s in {str(self.cwd)!r}")

    def call(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """Run ``git args``; its exit code is the caller's to judge."""
        proc = self._spawn(
            args,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        watchdog = _Watchdog(proc, self.timeout_s)
        try:
            out, err = proc.communicate(stdin)
        finally:
            watchdog.cancel()
            watchdog.kill()
            proc.wait()
        if watchdog.fired:
            raise self._timed_out(args[0])
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def run(self, *args: str, stdin: bytes | None = None) -> bytes:
        """stdout of ``git args``; raises `error` when git fails."""
        done = self.call(*args, stdin=stdin)
        if done.returncode != 0:
            stderr = done.stderr.decode("utf-8", "replace").strip()
            raise self.error(
                f"git {args[0]} failed in {str(self.cwd)!r} (exit {done.returncode}): {stderr}"
            )
        return done.stdout

    def cat_file(self, ids: Sequence[str]) -> CatFile:
        """A ``git cat-file --batch`` that will give the blobs `ids`, in that order."""
        return CatFile(self, ids)

    def blob_sha256s(
        self, shas: Collection[str], *, cache: BlobDigestCache | None = None
    ) -> dict[str, str]:
        """The SHA-256 of each blob's raw bytes: blob id -> hex digest.

        Blobs `cache` knows are not read; the others are read in one batch and
        handed to `cache`. Many blobs are split between `BATCH_PROCESSES` such
        batches read by as many threads, since git inflates and we hash in
        parallel (hashlib and pipe reads release the GIL).
        """
        digests = cached_digests(cache, shas)
        wanted = sorted(set(shas) - digests.keys())
        if not wanted:
            return digests
        if len(wanted) < BATCH_SPLIT_MIN:
            computed = self._hash_batch(wanted)
        else:
            parts = [wanted[i::BATCH_PROCESSES] for i in range(BATCH_PROCESSES)]
            computed = {}
            with ThreadPoolExecutor(BATCH_PROCESSES, thread_name_prefix="cat-file") as pool:
                for part in pool.map(self._hash_batch, parts):
                    computed.update(part)
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

    def __init__(self, git: Git, ids: Sequence[str]) -> None:
        self.git = git
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        try:
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
        self._pending: tuple[str, int] | None = None

    def __enter__(self) -> CatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._watchdog.cancel()
        self._watchdog.kill()  # done reading, or stopped early: git must stop too
        self._proc.wait()
        self._out.close()
        self._errors.close()

    def header(self, oid: str) -> int:
        """The size of the next record, which must be the blob `oid`."""
        line = self._out.readline()
        fields = line.split()
        if fields[1:] == [b"missing"]:
            raise self.git.error(f"git cat-file: object {oid} is missing from the repository")
        if len(fields) != 3 or fields[0] != oid.encode("ascii") or fields[1] != b"blob":
            shown = line.decode("utf-8", "replace").strip() or "end of output"
            raise self._broken(f"expected blob {oid}, got {shown!r}")
        size = int(fields[2])
        self._pending = (oid, size)
        return size

    def stream(self, oid: str, sink: Callable[[bytes], object]) -> int:
        """Hand the blob `oid`'s bytes to `sink` in chunks; its size."""
        size = self.header(oid) if self._pending is None else self._pending[1]
        self._pending = None
        left = size
        read = self._out.read
        while left:
            chunk = read(min(left, CHUNK))
            if not chunk:
                raise self._broken(f"object {oid} is cut short")
            sink(chunk)
            left -= len(chunk)
        if read(1) != b"\n":  # the newline that ends every record
            raise self._broken(f"object {oid} is not followed by a newline")
        return size

    def read(self, oid: str) -> bytes:
        """The blob `oid`'s bytes, whole: for small objects (link targets)."""
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
