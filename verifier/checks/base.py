"""What every check shares: the `Check` protocol, the `Context` it runs in, and the facts
one check establishes for another.

A check is an object with a `name`, a `title`, the `prefixes` of its finding
codes, the names of the checks whose results it `reads`, and
`run(context) -> CheckResult`. `verify()` starts each check as soon as the
checks it reads are done; a check reads what an earlier one established as
typed facts (`Context.fact(HeadState)`), never from its details or its finding
codes. Adding a check is a module and a line in `registered()`: the store keeps
statuses as rows, the renderers walk the results, and the gate
(`verifier.formats.gate.CHECK_OF_PREFIX`) and the findings catalogue read what
each check declares, so none of them changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from audit.findings import Finding
from verifier._internal.cancel import CancelToken
from verifier._internal.git import BlobDigestCache
from verifier.config import Config, RepositoryConfig
from verifier.errors import ObjectCorrupt
from verifier.findings import CheckResult, CheckStatus
from verifier.tasks import Task

if TYPE_CHECKING:
    from verifier.contract.report import Report

__all__ = [
    "Check",
    "Context",
    "DigestCache",
    "HeadState",
    "Progress",
    "TestResultCache",
    "WitnessedPrefix",
    "object_corrupt",
]

T = TypeVar("T")
# Blob id -> SHA-256 of its bytes, remembered across verifications (the store's, say).
DigestCache = BlobDigestCache
Progress = Callable[[str], None]


class TestResultCache(Protocol):
    """Conclusive test results by what decided them (`verifier.checks.tests.cache.cache_key`).

    The key is a SHA-256 over the tree actually tested, the test command, the
    environment, the sandbox settings and the verifier's version: a tree tested
    once under the same conditions is not tested again. The store keeps one
    (`verifier.store.cache`); the first result put under a key is the one kept.
    """

    def get(self, key: str) -> tuple[str, Mapping[str, Any]] | None:
        """The session first tested under `key` and its result, or None."""
        ...

    def put(self, key: str, session_id: str, result: Mapping[str, Any]) -> None:
        """Keep `result` (JSON data) as the tests of `session_id` under `key`."""
        ...


@dataclass(frozen=True)
class HeadState:
    """What the changes check established about the state the tests must run on."""

    mode: str  # "commit" or "worktree"
    base_commit: str
    head_commit: str | None  # the resolved full hash; None in worktree mode
    # Worktree mode: every file and link the changes check read (tracked, or untracked
    # and not ignored), by path, as `verifier._internal.repository.worktree_state` describes it
    # ("100644 <sha256>", "120000 <target>"): the copy for the tests must hold the
    # same bytes, modes and link targets (`SnapshotInfo.entries`).
    files: Mapping[str, str] = field(default_factory=dict, repr=False)
    # The paths that changed between base and head, sorted, and for those that are
    # regular files in the head commit their blob ids (empty in worktree mode): what
    # the tests check scans for tampering (`verifier.checks.tests.tampering`).
    changed: tuple[str, ...] = ()
    changed_blobs: Mapping[str, str] = field(default_factory=dict, repr=False)
    # The blob ids at the base of the changed paths that are regular files there: the
    # scan reports only what is new relative to them.
    base_blobs: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class WitnessedPrefix:
    """The prefix of the session's trail the service witnessed while it ran: each
    entry's hash and when it arrived, in order (`verifier.store.witness`). The
    pipeline reads it from the store and hands it in; the audit check compares."""

    hashes: tuple[str, ...]
    received: tuple[datetime, ...]

    @property
    def count(self) -> int:
        return len(self.hashes)


@dataclass
class Context:
    """Everything a check may use; `results` fills in as the checks finish."""

    report: Report
    config: Config
    repo: RepositoryConfig
    repo_path: Path | None
    test_command: tuple[str, ...]
    test_timeout_s: float
    cancel: CancelToken
    progress: Progress = lambda _line: None
    digest_cache: DigestCache | None = None
    test_cache: TestResultCache | None = None
    # Why `repo_path` is None though the repository is configured (its mirror could not
    # fetch the session's commits): the changes check says so, inconclusive.
    repo_problem: str | None = None
    # What the witness holds of this session's trail; None when no store was consulted.
    witnessed: WitnessedPrefix | None = None
    # The operator's task for this session, as the command layer resolved it (never the
    # report's own words); None when the session names none.
    task: Task | None = None
    results: dict[str, CheckResult] = field(default_factory=dict)
    # Set once the checks that `launch` long work (the test run) have started it, or
    # finished: CPU-heavy work that can wait (loading the SDK) waits for it, so it
    # does not slow the critical path down on the way to the test run.
    launched: threading.Event = field(default_factory=threading.Event)

    def fact(self, kind: type[T]) -> T | None:
        """The fact of type `kind` an earlier check established, if any."""
        for result in list(self.results.values()):  # a copy: other checks add theirs
            for fact in result.facts:
                if isinstance(fact, kind):
                    return fact
        return None


class Check(Protocol):
    """One check of the verdict, and what the faces need to know about it."""

    name: str
    # What people read it under: its section of docs/findings.md ("Changes").
    title: str
    # The start of every finding code it emits ("change."), each with the words the
    # gate uses for what found such a finding (`verifier.formats.gate.CHECK_OF_PREFIX`).
    prefixes: Mapping[str, str]
    # The checks whose results this one reads; it starts when they are done.
    reads: tuple[str, ...]
    # Whether it starts long work the others should not slow down (see Context.launched).
    launches: bool

    def run(self, context: Context) -> CheckResult: ...


def object_corrupt(name: str, exc: ObjectCorrupt, **details: Any) -> CheckResult:
    """Check `name` failed: git served an object whose bytes are not the ones its id names.

    A broken promise, not an infrastructure failure: the repository claims, by
    its trees, content it does not hold (a loose object rewritten to weaken an
    unchanged test, say). Whichever check reads the object first reports it.
    """
    finding = Finding(
        "change.object_corrupt",
        str(exc),
        path=exc.path or None,
        expected=f"{exc.kind} {exc.oid}",
        found=f"bytes hashing to {exc.found}",
    )
    return CheckResult(name, CheckStatus.FAIL, (finding,), details)
