"""A batch: many sessions verified at once, SWE-bench style (``verifier verify --batch``).

The batch file is JSON lines: each line is a report itself (an object with
``schema_version``) or ``{"report": "PATH"}``, a report file relative to the
batch file's folder. Each report names its task (``task_id``); the task counts
as the operator declared it (`verifier.app.tasks`). The sessions are verified
concurrently, `jobs` at a time, each through `pipeline.verify_report` (stored
like any other verification), and one `Batch` says what became of each: resolved
(delivered) or not, per task, with the tests check's classification when it made
one.

Sessions on one base share its test run: the first session of each base commit
(per repository) is verified first, and the others of that base only once it is
done, so the base tree is tested once and the rest find its result in the
store's cache (50 sessions on 5 bases test 5 bases), never racing to test it
side by side. A line that cannot be read, a report that is not one, a task
nobody declared: each is a refused entry naming its line, and the others go on.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.app import pipeline
from verifier.config import Config
from verifier.contract.report import parse_document
from verifier.errors import ConfigError, InvalidReport, VerifierError
from verifier.findings import DeliveryStatus

#: The most lines a batch file may hold.
MAX_LINES = 100_000


@dataclass(frozen=True)
class Entry:
    """One line of a batch file: the report's bytes and where they came from, or why not."""

    line: int
    source: str
    raw: bytes | pipeline.Oversized | None = None
    problem: str | None = None
    # Read cheaply before the batch runs, to order it by base.
    session_id: str | None = None
    task_id: str | None = None
    base: tuple[str, str] | None = None


@dataclass(frozen=True)
class Result:
    """What became of one entry: its verification, or the error that refused it."""

    entry: Entry
    outcome: pipeline.Outcome | None = None
    error: VerifierError | None = None

    @property
    def status(self) -> str:
        """delivered, not_delivered, inconclusive, or refused (never verified)."""
        if self.outcome is None:
            return "refused"
        return self.outcome.verification.delivery_status.value

    @property
    def resolved(self) -> bool:
        """SWE-bench's word: the session delivered its task."""
        return self.status == DeliveryStatus.DELIVERED.value

    @property
    def exit_code(self) -> int:
        if self.outcome is not None:
            return self.outcome.exit_code
        return self.error.exit_code if self.error is not None else 2

    def to_dict(self) -> dict[str, Any]:
        entry = self.entry
        data: dict[str, Any] = {
            "line": entry.line,
            "source": entry.source,
            "session_id": entry.session_id,
            "task_id": entry.task_id,
            "status": self.status,
            "resolved": self.resolved,
        }
        if self.outcome is not None:
            verification = self.outcome.verification
            first = verification.first_finding
            tests = verification.checks.get("tests")
            data["first_finding"] = None if first is None else first.to_dict()
            data["classification"] = None if tests is None else tests.details.get("classification")
            data["stored"] = self.outcome.stored
        else:
            data["error"] = {
                "code": self.error.code if self.error is not None else "invalid_line",
                "field": getattr(self.error, "field", None),
                "problem": self.error.problem_text() if self.error else entry.problem,
            }
        return data


@dataclass(frozen=True)
class Batch:
    """Every entry's result, in the order of the file, and what the batch took."""

    results: tuple[Result, ...]
    jobs: int
    seconds: float
    bases: int = 0

    @property
    def exit_code(self) -> int:
        """0 when every session was delivered; else the worst of the entries' codes (an
        inconclusive or refused entry, 3 or 2, before a failure, 1)."""
        codes = {r.exit_code for r in self.results} or {2}
        if codes == {0}:
            return 0
        for code in (3, 2, 1):
            if code in codes:
                return code
        return max(codes)

    def counts(self) -> dict[str, int]:
        statuses = [r.status for r in self.results]
        return {
            "sessions": len(statuses),
            "resolved": statuses.count("delivered"),
            "unresolved": statuses.count("not_delivered"),
            "inconclusive": statuses.count("inconclusive"),
            "refused": statuses.count("refused"),
        }

    def tasks(self) -> dict[str, dict[str, int]]:
        """Per task named, how many of its sessions were resolved of those judged (a
        refused entry was not judged: it is counted with the refused)."""
        out: dict[str, dict[str, int]] = {}
        for result in self.results:
            if result.status == "refused":
                continue
            key = result.entry.task_id or ""
            counts = out.setdefault(key, {"sessions": 0, "resolved": 0})
            counts["sessions"] += 1
            counts["resolved"] += int(result.resolved)
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        counts = self.counts()
        judged = counts["sessions"] - counts["refused"]
        return {
            **counts,
            "resolved_rate": round(counts["resolved"] / judged, 4) if judged else None,
            "jobs": self.jobs,
            "bases": self.bases,
            "seconds": round(self.seconds, 3),
            "tasks": self.tasks(),
            "results": [r.to_dict() for r in self.results],
        }


def default_jobs() -> int:
    """As many verifications at once as the machine has cores (each runs its tests)."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def read_batch(path: Path, limit: int) -> list[Entry]:
    """The entries of the batch file `path`; a line that cannot be read is an entry with
    its problem. `ConfigError` when the file itself cannot be read."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--batch: cannot read {str(path)!r}: {exc.strerror}") from None
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise ConfigError(f"--batch: {len(lines)} lines, over the limit of {MAX_LINES}")
    entries = [
        _entry(n, line, path.parent, limit) for n, line in enumerate(lines, 1) if line.strip()
    ]
    if not entries:
        raise ConfigError(f"--batch: {str(path)!r} holds no session")
    return entries


def _entry(n: int, line: bytes, folder: Path, limit: int) -> Entry:
    where = f"line {n}"
    try:
        item = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return Entry(n, where, problem=f"{where}: not JSON ({exc})")
    if not isinstance(item, dict):
        return Entry(n, where, problem=f"{where}: expected an object, got {type(item).__name__}")
    if "schema_version" in item:
        return _peek(Entry(n, where, line), limit)
    extra = sorted(set(item) - {"report"})
    if extra:
        return Entry(n, where, problem=f"{where}: unknown key {extra[0]!r} (expected report)")
    report = item.get("report")
    if not isinstance(report, str) or not report:
        return Entry(n, where, problem=f"{where}: report: expected the path of a report file")
    source = str(folder / report)
    try:
        raw = pipeline.read_source(source, limit)
    except ConfigError as exc:
        return Entry(n, source, problem=f"{where}: {exc}")
    return _peek(Entry(n, source, raw), limit)


def _peek(entry: Entry, limit: int) -> Entry:
    """The entry with what orders the batch (its session, task and base), when its bytes
    read as a report; otherwise as it is (its verification says why it is not one)."""
    if not isinstance(entry.raw, bytes) or len(entry.raw) > limit:
        return entry
    try:
        doc = parse_document(entry.raw).doc
    except InvalidReport:
        return entry
    return Entry(
        entry.line,
        entry.source,
        entry.raw,
        session_id=doc.session_id,
        task_id=doc.task_id,
        base=(doc.repo.name, doc.repo.base_commit),
    )


def verify_batch(
    config: Config,
    path: Path,
    *,
    jobs: int | None = None,
    store: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Batch:
    """Verify every session of the batch file `path`, `jobs` at a time (default: the
    cores), the first of each base before the others of that base; each one stored as a
    run, unless `store` is False."""
    started = time.perf_counter()
    entries = read_batch(path, config.max_report_bytes)
    jobs = jobs or default_jobs()
    results: dict[int, Result] = {}
    groups = _groups(entries)
    total = len(entries)

    def run(entry: Entry) -> Result:
        assert entry.raw is not None
        try:
            outcome = pipeline.verify_report(entry.raw, config, store=store, source=entry.source)
        except VerifierError as exc:
            return Result(entry, error=exc)
        return Result(entry, outcome)

    def finished(result: Result) -> None:
        results[result.entry.line] = result
        if progress is not None:
            name = result.entry.session_id or result.entry.source
            progress(f"{len(results)}/{total} {result.status}: {name}")

    for entry in entries:
        if entry.raw is None:
            finished(Result(entry))
    with ThreadPoolExecutor(jobs, thread_name_prefix="batch") as pool:
        running: dict[Future[Result], deque[Entry]] = {}
        try:
            for group in groups:
                running[pool.submit(run, group.popleft())] = group
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    group = running.pop(future)
                    finished(future.result())
                    # The base's run is now kept: the rest of its sessions may go.
                    while group:
                        running[pool.submit(run, group.popleft())] = deque()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    ordered = tuple(results[e.line] for e in entries)
    bases = len({e.base for e in entries if e.base is not None})
    return Batch(ordered, jobs, time.perf_counter() - started, bases=bases)


def _groups(entries: list[Entry]) -> list[deque[Entry]]:
    """The entries to verify, by base (repository and base commit), in the file's order;
    an entry whose base is unknown is a group of its own."""
    by_base: dict[Any, deque[Entry]] = {}
    for entry in entries:
        if entry.raw is None:
            continue
        key = entry.base if entry.base is not None else ("line", entry.line)
        by_base.setdefault(key, deque()).append(entry)
    return list(by_base.values())


__all__ = ["Batch", "Entry", "Result", "default_jobs", "read_batch", "verify_batch"]
