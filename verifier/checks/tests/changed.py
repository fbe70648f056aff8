"""The files the session changed, read as the changes check saw them, and scanned for code
that reaches into the test machinery after a run that would pass.

The changed files are read as the changes check saw them: their blobs in the
head commit, or, in worktree mode, the working tree's files read without
following a link, which must still hash as the changes check hashed them
(`tests.head_moved` otherwise). Their blobs at the base are read too: only what
is new relative to them is reported. What the run took from the base
(`verifier.checks.tests.testinfra.BaseInfra`) is not scanned; when nothing was
taken from there (``test_infra_from_base = false``), the repository's
``test_paths`` are the test code. A hit of the scan
(`verifier.checks.tests.tampering`) is `tests.tampering_suspected`:
inconclusive, for a person to judge (docs/security.md).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from verifier._internal.git import Git
from verifier.checks.base import HeadState
from verifier.checks.tests import tampering
from verifier.checks.tests.judge import error
from verifier.checks.tests.testinfra import DEFAULT_TEST_PATHS, BaseInfra, is_test_infra
from verifier.errors import InfrastructureError
from verifier.findings import CheckResult, CheckStatus, Finding
from verifier.resources import tampering_patterns_file

__all__ = ["Scanned", "read_and_scan", "scan"]


def scan(
    repo_path: Path,
    head: HeadState,
    result: CheckResult,
    infra: BaseInfra | None = None,
    test_paths: Sequence[str] = DEFAULT_TEST_PATHS,
    scanned: Scanned | None = None,
) -> CheckResult:
    """`result`, made inconclusive when the changed files reach into the test machinery.

    `infra` is what the run took from the base (those paths are not scanned);
    None when it took nothing, and then `test_paths` are the test code.
    The scan's time is added to the result's; an error of its own (the changed
    files cannot be read, or the working tree moved) is timed from the scan's start.
    `scanned` is the scan made already (`read_and_scan` with the same `infra`: the
    tests check makes it while the tests run); else it is made now.
    """
    if scanned is None:
        scanned = read_and_scan(repo_path, head, infra, test_paths)
    if scanned.error is not None:
        return scanned.error
    status = CheckStatus.ERROR if scanned.findings else result.status
    return replace(
        result,
        status=status,
        findings=(*result.findings, *scanned.findings),
        notes=(*result.notes, *scanned.notes),
        duration_s=result.duration_s + scanned.elapsed_s,
    )


@dataclass(frozen=True)
class Scanned:
    """What the scan of the changed files found (`findings`, `notes`) in `elapsed_s`, or
    the error that stopped it (`error`: the changed files could not be read, or moved)."""

    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    error: CheckResult | None = None


def read_and_scan(
    repo_path: Path,
    head: HeadState,
    infra: BaseInfra | None = None,
    test_paths: Sequence[str] = DEFAULT_TEST_PATHS,
) -> Scanned:
    """Read the changed files (and their base versions) as the changes check saw them, and
    scan them (`verifier.checks.tests.tampering`): what `scan` adds to a result. It
    depends on the session and on what the run takes from the base, never on the run."""
    started = time.monotonic()
    patterns = tampering.load_patterns(tampering_patterns_file())
    cap = patterns.max_file_bytes + 1  # one byte over the cap is enough to skip a file
    exempt = infra.paths if infra is not None else frozenset()
    test_code = frozenset(
        () if infra is not None else (p for p in head.changed if is_test_infra(p, test_paths))
    )
    wanted = [
        p for p in head.changed if p not in exempt and patterns.applicable(p, test=p in test_code)
    ]
    files: dict[str, bytes] = {}
    base: dict[str, bytes] = {}
    try:
        # The base's versions first, then the head's blobs, in one git.
        before = [p for p in wanted if p in head.base_blobs]
        paths = [p for p in wanted if p in head.changed_blobs] if head.mode == "commit" else []
        ids = [head.base_blobs[p] for p in before] + [head.changed_blobs[p] for p in paths]
        with Git(repo_path).cat_file(ids) as batch:
            for path in before:
                kept = _Head(cap)
                batch.stream(head.base_blobs[path], kept.add)
                base[path] = bytes(kept.data)
            for path in paths:
                kept = _Head(cap)
                batch.stream(head.changed_blobs[path], kept.add)
                files[path] = bytes(kept.data)
        if head.mode != "commit":
            for path in wanted:
                kept = _Head(cap)
                if not _read_in_root(repo_path.resolve(), path, kept):
                    continue
                # "<mode> <sha256>" as the changes check read it (`paths.worktree_state`)
                expected = head.files.get(path, "").partition(" ")[2] or None
                if expected is not None and kept.sha256.hexdigest() != expected:
                    return Scanned(
                        error=error(
                            started,
                            "tests.head_moved",
                            f"the working tree changed while it was verified: {path!r} "
                            "differs between the changes check and the scan for tampering",
                        )
                    )
                files[path] = bytes(kept.data)
    except InfrastructureError as exc:
        return Scanned(error=error(started, "tests.snapshot_failed", f"the changed files: {exc}"))
    notes: list[str] = []
    findings = tampering.scan(files, patterns, base=base, test_code=test_code, notes=notes)
    return Scanned(tuple(findings), tuple(notes), time.monotonic() - started)


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
