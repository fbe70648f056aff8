"""The files the session changed, read as the changes check saw them, and scanned for code
that reaches into the test machinery after a run that would pass.

The changed files are read as the changes check saw them: their blobs in the
head commit, or, in worktree mode, the working tree's files read without
following a link, which must still hash as the changes check hashed them
(`tests.head_moved` otherwise). A hit of the scan (`verifier.checks.tests.tampering`)
is `tests.tampering_suspected`: inconclusive, for a person to judge
(docs/security.md).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

from verifier._internal.git import Git
from verifier.checks.base import HeadState
from verifier.checks.tests import tampering
from verifier.checks.tests.judge import error
from verifier.errors import InfrastructureError
from verifier.findings import CheckResult, CheckStatus
from verifier.resources import tampering_patterns_file

__all__ = ["scan"]


def scan(repo_path: Path, head: HeadState, result: CheckResult) -> CheckResult:
    """`result`, made inconclusive when the changed files reach into the test machinery.

    The scan's time is added to the result's; an error of its own (the changed
    files cannot be read, or the working tree moved) is timed from the scan's start.
    """
    started = time.monotonic()
    patterns = tampering.load_patterns(tampering_patterns_file())
    cap = patterns.max_file_bytes + 1  # one byte over the cap is enough to skip a file
    wanted = [p for p in head.changed if patterns.applicable(p)]
    files: dict[str, bytes] = {}
    try:
        if head.mode == "commit":
            paths = [p for p in wanted if p in head.changed_blobs]
            with Git(repo_path).cat_file([head.changed_blobs[p] for p in paths]) as batch:
                for path in paths:
                    kept = _Head(cap)
                    batch.stream(head.changed_blobs[path], kept.add)
                    files[path] = bytes(kept.data)
        else:
            for path in wanted:
                kept = _Head(cap)
                if not _read_in_root(repo_path.resolve(), path, kept):
                    continue
                # "<mode> <sha256>" as the changes check read it (`paths.worktree_state`)
                expected = head.files.get(path, "").partition(" ")[2] or None
                if expected is not None and kept.sha256.hexdigest() != expected:
                    return error(
                        started,
                        "tests.head_moved",
                        f"the working tree changed while it was verified: {path!r} differs "
                        "between the changes check and the scan for tampering",
                    )
                files[path] = bytes(kept.data)
    except InfrastructureError as exc:
        return error(started, "tests.snapshot_failed", f"the changed files: {exc}")
    notes: list[str] = []
    findings = tampering.scan(files, patterns, notes=notes)
    elapsed = time.monotonic() - started
    status = CheckStatus.ERROR if findings else result.status
    return replace(
        result,
        status=status,
        findings=(*result.findings, *findings),
        notes=(*result.notes, *notes),
        duration_s=result.duration_s + elapsed,
    )


class _Head:
    """The first `cap` bytes of a stream and the SHA-256 of all of it: a file too large
    to scan costs no more memory than the cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.sha256 = hashlib.sha256()

    def add(self, chunk: bytes) -> None:
        self.sha256.update(chunk)
        if len(self.data) < self.cap:
            self.data += chunk[: self.cap - len(self.data)]


def _read_in_root(root: Path, rel: str, sink: _Head) -> bool:
    """Stream the regular file `rel` under `root` into `sink`; False when it is absent or
    not a regular file. No link is followed on the way, so nothing outside the root is read."""
    flags = os.O_RDONLY | os.O_NOFOLLOW
    try:
        fd = os.open(root, flags | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        for name in rel.split("/")[:-1]:
            nfd = os.open(name, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        ffd = os.open(rel.rsplit("/", 1)[-1], flags | os.O_NONBLOCK, dir_fd=fd)
        with os.fdopen(ffd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(ffd).st_mode):
                return False
            while chunk := fh.read(1 << 16):
                sink.add(chunk)
            return True
    except OSError:  # absent, a link (ELOOP), a folder swapped in: not this scan's to judge
        return False
    finally:
        os.close(fd)
