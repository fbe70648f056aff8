"""The one pipeline every face calls: submit, verify, record.

The command line, the demo, and next the API and the workers, call these
functions; none of them opens the store and sequences the steps itself.

* `submit`: bytes in, a stored session out (or the bytes kept as rejected);
* `verify_report`: bytes in, a verdict out, stored as a run unless told not to
  (`verify_file`: the same, the bytes read from a file or stdin);
* `record`: a verdict appended to its session's runs;
* `verify_session`: a stored session verified again from its stored bytes (the
  workers' step), and `reverify`, which asks the queue for that.

`verify_report` and `verify_session` share one sequence (`_verify_and_record`):
the mirror, the checks with the store as their caches, the run recorded, the
blob digests saved.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from verifier.app.tasks import resolve as resolve_task
from verifier.checks.base import Progress, WitnessedPrefix
from verifier.config import DEFAULT_MAX_REPORT_BYTES, Config
from verifier.contract.report import Report, parse_document
from verifier.errors import ConfigError, InfrastructureError, InvalidReport, ReportPruned
from verifier.findings import DeliveryStatus, Verification
from verifier.verify import Options, verify

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from verifier.store import SessionRow, Store
    from verifier.store.queue import Queue

EXIT_CODES = {
    DeliveryStatus.DELIVERED: 0,
    DeliveryStatus.NOT_DELIVERED: 1,
    DeliveryStatus.INCONCLUSIVE: 3,
}
# Fewer blobs than this are hashed rather than looked up: opening the store costs more.
DIGEST_CACHE_MIN = 64
# An open of the store slower than this migrated it (or waited for it): its garbage is collected.
SLOW_OPEN_S = 0.1
# What is kept of a report over `max_report_bytes`: its first bytes, beside the hash of the whole.
KEPT_BYTES = 64 * 1024
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Oversized:
    """A report over the size limit: its first bytes, and the size and SHA-256 of the whole.

    Why: a report is read whole before it is parsed, so its size is the memory
    it takes; one over the limit is never held, only streamed through the hash.
    """

    head: bytes
    size: int
    sha256: str
    limit: int

    @classmethod
    def of(cls, raw: bytes, limit: int) -> Oversized:
        return cls(raw[:KEPT_BYTES], len(raw), hashlib.sha256(raw).hexdigest(), limit)

    def error(self) -> InvalidReport:
        return InvalidReport(
            "$",
            f"report is {self.size} bytes, over the limit of {self.limit} bytes (max_report_bytes)",
        )


class BoundedBody:
    """Bytes fed in chunks: held while they are at most `limit`; past it, what
    `Oversized` keeps (the first bytes), with the rest only hashed and counted.

    One reader for every way a report arrives: a file or stdin (`read_report`),
    an HTTP body (the API feeds it the request's stream).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: list[bytes] = []
        self._size = 0
        self._digest: Any = None
        self._head = bytearray()

    def add(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._digest is None:
            self._chunks.append(chunk)
            if self._size <= self.limit:
                return
            self._digest = hashlib.sha256()
            pending, self._chunks = self._chunks, []
        else:
            pending = [chunk]
        for part in pending:
            self._digest.update(part)
            self._head += part[: KEPT_BYTES - len(self._head)]

    def result(self) -> bytes | Oversized:
        if self._digest is None:
            return b"".join(self._chunks)
        return Oversized(bytes(self._head), self._size, self._digest.hexdigest(), self.limit)


def read_report(stream: BinaryIO, limit: int) -> bytes | Oversized:
    """The stream's bytes when they are at most `limit`; otherwise what `Oversized` keeps.

    Past the limit the rest is read in chunks, hashed and counted, never held.
    """
    body = BoundedBody(limit)
    while chunk := stream.read(_CHUNK):
        body.add(chunk)
    return body.result()


def read_source(source: str, limit: int) -> bytes | Oversized:
    """A report's bytes from the file `source`, or from stdin for ``-`` (`read_report`);
    a file that cannot be read is `ConfigError`."""
    if source == "-":
        return read_report(sys.stdin.buffer, limit)
    try:
        with Path(source).open("rb") as stream:
            return read_report(stream, limit)
    except OSError as exc:
        raise ConfigError(f"cannot read report {source!r}: {exc.strerror}") from None


def _within(raw: bytes | Oversized, limit: int) -> bytes | Oversized:
    """Bytes handed in whole are held to the same limit as bytes read by `read_report`."""
    if isinstance(raw, bytes) and len(raw) > limit:
        return Oversized.of(raw, limit)
    return raw


@dataclass(frozen=True)
class Outcome:
    """A verification and what became of it in the store."""

    verification: Verification
    run_id: int | None
    stored: str  # "stored as run 3", "not stored: ...", "not stored (--no-store)"

    @property
    def exit_code(self) -> int:
        """The verdict's exit code; a delivery that could not be stored is inconclusive."""
        code = EXIT_CODES[self.verification.delivery_status]
        return (
            3
            if code == 0 and self.run_id is None and self.stored.startswith("not stored:")
            else code
        )


def submit(
    store: Store,
    raw: bytes | Oversized,
    source: str,
    *,
    max_report_bytes: int = DEFAULT_MAX_REPORT_BYTES,
    queue: Queue | None = None,
    config: Config | None = None,
    bound_agent: str | None = None,
) -> tuple[SessionRow, bool]:
    """Store a report's bytes as a session; True when new.

    Bytes that cannot be read as a report are kept with why, and `InvalidReport`
    is raised (of a report over `max_report_bytes`, its first bytes and the hash
    of the whole); other bytes under a stored session id raise `SessionConflict`.
    With a `config`, the signature policy of its ``[agents]`` applies
    (`verifier.contract.signatures.require`): a report of an agent with keys that is
    unsigned or badly signed is kept as rejected (field ``signature``) and
    `InvalidReport` raised, so its session id stays free. A `bound_agent` (the
    posting token's) refuses, `Forbidden`, a report of another agent.
    With a `queue`, a new session's verification is queued: in the transaction
    that stores it when the queue lives in the same database (PostgreSQL), else
    once it is stored (the in-process pool, which also picks up pending sessions
    when it starts).
    """
    from verifier.contract.report import parse_report

    def keep(kept: bytes | Oversized, exc: InvalidReport) -> None:
        _keep(store, kept, source, exc)

    report = _read(raw, max_report_bytes, parse_report, keep)
    _trusted(report, config, bound_agent, keep)
    # A task nobody declared is refused before anything is stored (`UnknownTask`).
    resolve_task(config if config is not None else Config(), report, store)
    on_insert = None if queue is None else queue.on_insert(report.session_id, "ingest")
    row, new = store.ingest(report, on_insert=on_insert)
    if new and queue is not None and on_insert is None:
        queue.enqueue(report.session_id, "ingest")
    return row, new


def record(
    store: Store,
    verification: Verification,
    config: Config | None = None,
    *,
    reason: str | None = None,
    job_id: int | None = None,
    worker: str | None = None,
    guard: Callable[[Connection], bool] | None = None,
) -> int:
    """Append a run to the session's runs; returns its id. The one place runs are
    recorded: the configured webhooks are then notified (`verifier.app.notify`), which
    never fails the run."""
    run_id = store.record_run(
        verification, reason=reason, job_id=job_id, worker=worker, guard=guard
    )
    if config is not None and config.webhooks:
        from verifier.app.notify import notify_run

        notify_run(store, config, verification, run_id)
    return run_id


def verify_report(
    raw: bytes | Oversized,
    config: Config,
    options: Options | None = None,
    *,
    store: bool = True,
    source: str = "-",
    progress: Progress | None = None,
) -> Outcome:
    """Verify a report's bytes and record the verdict.

    1. read the document (all but the trajectory); bytes that are not a report
       are kept as rejected and `InvalidReport` is raised (a report over
       ``max_report_bytes`` is refused unread: its first bytes and its hash are kept);
    2. a ``--repo`` that is not a git repository, or whose policy is in doubt
       (`check_policy`), is the operator's mistake (`ConfigError`), not a
       verdict: nothing is stored; a repository given by ``url`` is fetched
       into this worker's mirror (`mirrored`);
    3. verify, the store serving as the cache of blob digests and of test
       results; as soon as the whole report has loaded, while the tests run, it
       is stored as the session (a session id stored with other bytes raises
       `SessionConflict` and cancels the checks);
    4. record the run. A store we cannot reach does not stop the verification:
       the verdict is printed, and a delivery becomes inconclusive.
    """
    options = options or Options()
    db = _Database(config.database_url) if store else None
    if db is not None and config.test_result_cache:
        # The tests check asks the store for a kept result before it starts the run:
        # opened meanwhile (imports, connection), it is ready by then.
        threading.Thread(target=db.store, name="open-store", daemon=True).start()
    try:

        def keep(kept: bytes | Oversized, exc: InvalidReport) -> None:
            _reject(db, kept, source, exc)

        report = _read(raw, config.max_report_bytes, parse_document, keep)
        if db is not None:
            _trusted(report, config, None, keep)

        if options.repo_path is not None:
            _require_repository(options.repo_path)
        check_policy(config, report.doc.repo.name, options)

        try:
            verification, run_id = _verify_and_record(
                report, config, options, db, progress, admit=True
            )
        except InvalidReport as exc:  # the trajectory, loaded while the tests ran
            keep(report.raw, exc)
            raise
        except _NotRecorded as exc:  # the verdict stands; a delivery becomes inconclusive
            return Outcome(exc.verification, None, f"not stored: {exc.problem}")
        if run_id is None:
            return Outcome(verification, None, "not stored (--no-store)")
        return Outcome(verification, run_id, f"stored as run {run_id}")
    finally:
        if db is not None:
            db.close()


def verify_file(
    config: Config,
    source: str,
    *,
    repo_path: Path | None = None,
    repo_name: str | None = None,
    test_command: Sequence[str] | None = None,
    test_timeout_s: float | None = None,
    store: bool = True,
    progress: Progress | None = None,
) -> Outcome:
    """`verify_report` of the report in the file `source` (``-``: stdin), with what the
    command line overrides: the repository's path, the policy's repository, the test
    command and its timeout."""
    options = Options(
        repo_path=repo_path,
        repo_name=repo_name,
        test_command=test_command,
        test_timeout_s=test_timeout_s,
    )
    raw = read_source(source, config.max_report_bytes)
    return verify_report(raw, config, options, store=store, source=source, progress=progress)


def verify_session(
    store: Store,
    session_id: str,
    config: Config,
    *,
    reason: str,
    job_id: int | None = None,
    worker: str | None = None,
    guard: Callable[[Connection], bool] | None = None,
) -> Outcome:
    """Verify a stored session from the bytes it was received as, and record the run.

    The workers' step, the same checks and the same record as `verify_report`:

    1. read the stored report (`NotFound` when the session is not stored, or its
       bytes were pruned);
    2. verify it with the configured repository (a repository given by ``url``
       fetched into this worker's mirror, `mirrored`) and test command, the store
       serving as the cache of blob digests and of test results;
    3. record the run with why it happened (`reason`), the queue's job and the
       worker that ran it, in one transaction that first calls `guard`: a guard
       that says False (the job is no longer this worker's) raises `LostJob` and
       nothing is written. A store that cannot be written raises
       `InfrastructureError`, for the queue to retry.

    The worker counts the run's check durations in its metrics once this returns.
    """
    report = parse_document(store.report_bytes(session_id))
    run = _Run(reason=reason, job_id=job_id, worker=worker, guard=guard)
    try:
        verification, run_id = _verify_and_record(
            report, config, Options(), _Database.over(store), run=run
        )
    except _NotRecorded as exc:
        raise exc.cause from None
    assert run_id is not None  # a store was given: the run is recorded or this raised
    return Outcome(verification, run_id, f"stored as run {run_id}")


@dataclass(frozen=True)
class _Run:
    """How a run is recorded: why it happened, the queue's job, the worker, its guard."""

    reason: str | None = None
    job_id: int | None = None
    worker: str | None = None
    guard: Callable[[Connection], bool] | None = None


class _NotRecorded(Exception):
    """A verdict reached whose run could not be recorded (`cause` says why)."""

    def __init__(self, verification: Verification, cause: InfrastructureError) -> None:
        super().__init__(str(cause))
        self.verification = verification
        self.cause = cause
        self.problem = str(cause)


def _verify_and_record(
    report: Report,
    config: Config,
    options: Options,
    db: _Database | None,
    progress: Progress | None = None,
    *,
    admit: bool = False,
    run: _Run = _Run(),
) -> tuple[Verification, int | None]:
    """The sequence `verify_report` and `verify_session` share; the run's id, or None
    without a store (``--no-store``).

    1. the operator's task the report names (`verifier.app.tasks.resolve`): one nobody
       declared raises `UnknownTask` before anything is stored; a repository given by
       ``url`` fetched into this worker's mirror (`mirrored`);
    2. verify, judged by that task, the store serving as the cache of blob digests and
       of test results (and, with `admit`, storing the report as its session as soon as it has
       loaded), the witness's copy of the trail consulted;
    3. record the run (`record`): a store that cannot be opened or written raises
       `_NotRecorded`, carrying the verdict;
    4. save the blob digests the changes check computed.
    """
    store = None if db is None else db.store()
    # Before anything of the report is stored: a task nobody declared is `UnknownTask`.
    resolved = resolve_task(config, report, store, repo_name=options.repo_name)
    options, repo_problem = mirrored(config, report, options, progress)
    witnessed, foreign = (None, ()) if db is None else _witnessed(store, report)
    verification = verify(
        report,
        config,
        options,
        progress,
        admit=db.admit if db is not None and admit else None,
        digest_cache=db,
        test_cache=db if db is not None and config.test_result_cache else None,
        repo_problem=repo_problem,
        witnessed=witnessed,
        task=resolved.task,
    )
    notes = (*resolved.notes, *((_foreign_note(foreign),) if foreign else ()))
    if notes:
        verification = replace(verification, notes=(*verification.notes, *notes))
    if db is None:
        return verification, None
    try:
        if store is None:
            raise InfrastructureError(db.problem or "the store cannot be opened")
        run_id = record(
            store,
            verification,
            config,
            reason=run.reason,
            job_id=run.job_id,
            worker=run.worker,
            guard=run.guard,
        )
    except InfrastructureError as exc:
        raise _NotRecorded(verification, exc) from None
    db.save_digests()
    return verification, run_id


def reverify(
    store: Store, session_id: str, queue: Queue, *, actor: str, reason: str = "reverify"
) -> bool:
    """Queue a stored session for another verification; False when one is already waiting.

    An administrative act: it goes into the admin log (who, when), then into the
    queue. `NotFound` when the session is not stored, `ReportPruned` when its report
    was pruned: nothing logged, nothing queued.
    """
    from verifier.store.tokens import log_admin

    session = store.get_session(session_id)
    if session.pruned_at is not None:
        raise ReportPruned(session_id, session.pruned_at)
    log_admin(store, actor=actor, action="session.reverify", subject=session_id)
    return queue.enqueue(session_id, reason)


def mirrored(
    config: Config, report: Report, options: Options, progress: Progress | None = None
) -> tuple[Options, str | None]:
    """`options` with the mirror of a repository given by ``url`` as its path, once it
    holds the session's base and head; or `options` as they are and why not.

    A ``--repo`` wins over the url. A fetch that fails is no verdict of its own:
    the changes check reports it (``change.fetch_failed``), inconclusive.
    """
    repo = config.repository(options.repo_name or report.doc.repo.name)
    if options.repo_path is not None or repo.url is None:
        return options, None
    from verifier._internal.mirror import Mirror

    mirror = Mirror(repo.url, config.mirror_cache, timeout_s=config.fetch_timeout_s)
    commits = [c for c in (report.doc.repo.base_commit, report.doc.repo.head_commit) if c]
    if progress is not None:
        progress(f"fetching the session's commits into {mirror.path}")
    try:
        # With a trusted_ref the branches must be the remote's current ones.
        path = mirror.ensure(commits, refresh=repo.trusted_ref is not None)
    except InfrastructureError as exc:
        return options, str(exc)
    return replace(options, repo_path=path), None


def check_policy(config: Config, report_name: str, options: Options) -> None:
    """Refuse a verification whose policy the report, not the operator, would pick.

    ``--repo-name`` must name a configured repository: the operator binds the
    path to that policy explicitly. Without it, the policy is the one of the
    report's ``repo.name``; with ``--repo``, a report could name a laxer
    configured repository (fewer protected paths, another test command) while
    the operator points at the protected one. So ``--repo`` must be the
    configured path of ``repo.name`` when it has one, and a ``--repo`` that is
    the configured path of other names must be one of those names.
    """
    if options.repo_name is not None:
        if options.repo_name not in config.repositories:
            known = ", ".join(sorted(config.repositories)) or "none"
            raise ConfigError(
                f"--repo-name: no repository {options.repo_name!r} in the configuration "
                f"(configured: {known})"
            )
        return
    if options.repo_path is None:
        return
    given = options.repo_path.resolve()
    owners = sorted(
        name
        for name, repo in config.repositories.items()
        if repo.path is not None and repo.path.resolve() == given
    )
    named = config.repositories.get(report_name)
    if named is not None and named.path is not None and named.path.resolve() != given:
        raise ConfigError(
            f"--repo {str(options.repo_path)!r} is not the repository the report names: "
            f"repo.name {report_name!r} is configured with path {str(named.path)!r}; "
            "pass --repo-name to choose the policy for this path"
        )
    if owners and report_name not in owners:
        raise ConfigError(
            f"--repo {str(options.repo_path)!r} is configured as {owners[0]!r}, but the report "
            f"names repo.name {report_name!r}; pass --repo-name to choose the policy"
        )


def _require_repository(path: Path) -> None:
    from verifier._internal.repository import Repository

    try:
        Repository(path).close()
    except InfrastructureError as exc:
        raise ConfigError(f"--repo: {exc}") from None


def _read(
    raw: bytes | Oversized,
    limit: int,
    parse: Callable[[bytes], Report],
    keep: Callable[[bytes | Oversized, InvalidReport], None],
) -> Report:
    """`parse` the bytes within `limit`; what cannot be read is handed to `keep`, then raised."""
    raw = _within(raw, limit)
    try:
        if isinstance(raw, Oversized):
            raise raw.error()
        return parse(raw)
    except InvalidReport as exc:
        keep(raw, exc)
        raise


def _reject(db: _Database | None, raw: bytes | Oversized, source: str, exc: InvalidReport) -> None:
    """Keep the bytes of a report we could not read; the report error is the one shown."""
    if db is None:
        return
    try:
        store = db.store()
        if store is not None:
            _keep(store, raw, source, exc)
    except InfrastructureError:
        pass


def _keep(store: Store, raw: bytes | Oversized, source: str, exc: InvalidReport) -> None:
    """Keep what could not be read: the bytes, or of an oversized report its first
    bytes, the hash and the size of the whole."""
    if isinstance(raw, Oversized):
        store.reject(
            raw.head,
            source=source,
            field=exc.field,
            problem=exc.problem_text(),
            sha256=raw.sha256,
            size=raw.size,
        )
    else:
        store.reject(raw, source=source, field=exc.field, problem=exc.problem_text())


def _trusted(
    report: Report,
    config: Config | None,
    bound_agent: str | None,
    keep: Callable[[bytes | Oversized, InvalidReport], None],
) -> None:
    """Refuse, keeping the bytes as rejected, a report its token or its signature does
    not admit."""
    from verifier.contract import signatures
    from verifier.errors import Forbidden

    name = report.doc.agent.name
    if bound_agent is not None and name != bound_agent:
        problem = f"the token is bound to agent {bound_agent!r}; this report is agent {name!r}'s"
        keep(report.raw, InvalidReport("agent.name", problem))
        raise Forbidden("agent.name", problem)
    if config is None:
        return
    try:
        signatures.require(report.raw, config)
    except InvalidReport as exc:
        keep(report.raw, exc)
        raise


def _witnessed(
    store: Store | None, report: Report
) -> tuple[WitnessedPrefix | None, tuple[str, ...]]:
    """What the witness holds of the trail of the report's agent, for the audit check
    (None when the store cannot tell: the check then says the witness was not
    consulted), and the other agents whose tokens posted a trail under its session id:
    the report is never held to theirs."""
    if store is None:
        return None, ()
    from verifier.store.witness import trail_agents, witnessed

    agent = report.doc.agent.name
    try:
        prefix = WitnessedPrefix(*witnessed(store, report.session_id, agent))
        foreign = tuple(a for a in trail_agents(store, report.session_id) if a not in ("", agent))
    except InfrastructureError:
        return None, ()
    return prefix, foreign


def _foreign_note(agents: Sequence[str]) -> str:
    names = ", ".join(repr(a) for a in agents)
    return (
        f"the witness also holds a trail of this session id posted under the token of "
        f"agent {names}: not this report's agent, so the report is not held to it"
    )


class _Database:
    """The store for one verification, opened once, on first use, from any thread.

    It is also the changes check's blob digest cache: lookups of many blobs go to
    the store, and new digests are written with the run; and the tests check's
    `TestResultCache` (`verifier.store.cache`), written as soon as a result is
    known, so another worker testing the same tree meanwhile can use it. Both
    are only caches: a store that fails them costs time, never a verdict.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._problem: str | None = None
        self._new_digests: dict[str, str] = {}
        self._owned = True

    @classmethod
    def over(cls, store: Store) -> _Database:
        """The caches over a store the caller opened (and closes)."""
        db = cls(store.url)
        db._store = store
        db._owned = False
        return db

    def store(self) -> Store | None:
        """The open store, or None when it cannot be used (`problem` says why)."""
        with self._lock:
            if self._store is None and self._problem is None:
                from verifier.store import Store

                started = time.perf_counter()
                try:
                    self._store = Store.open(self._url)
                except InfrastructureError as exc:
                    self._problem = str(exc)
                if time.perf_counter() - started > SLOW_OPEN_S:
                    # It migrated (a new embedded store): Alembic's tables are left as cyclic
                    # garbage, collected here, in the thread that opened it, rather than by
                    # whichever thread allocates next (the main thread loading the trajectory).
                    gc.collect()
            return self._store

    @property
    def problem(self) -> str | None:
        """Why the store cannot be used, once opening it failed."""
        return self._problem

    def admit(self, report: Report) -> None:
        store = self.store()
        if store is not None:
            store.ingest(report)

    def get_many(self, blob_ids: Collection[str]) -> dict[str, str]:
        if len(blob_ids) < DIGEST_CACHE_MIN:
            return {}
        store = self.store()
        try:
            return {} if store is None else store.blob_digests(blob_ids)
        except InfrastructureError:
            return {}

    def put_many(self, digests: Mapping[str, str]) -> None:
        with self._lock:
            self._new_digests.update(digests)

    def get(self, key: str) -> tuple[str, Mapping[str, Any]] | None:
        store = self.store()
        if store is None:
            return None
        from verifier.store.cache import TestResults

        try:
            return TestResults(store).get(key)
        except InfrastructureError:
            return None

    def put(self, key: str, session_id: str, result: Mapping[str, Any]) -> None:
        store = self.store()
        if store is None:
            return
        from verifier.store.cache import TestResults

        with contextlib.suppress(InfrastructureError):
            TestResults(store).put(key, session_id, result)

    def save_digests(self) -> None:
        """Write the digests the changes check computed, when they are worth a write."""
        if self._store is not None and len(self._new_digests) >= DIGEST_CACHE_MIN:
            with contextlib.suppress(InfrastructureError):  # only a cache
                self._store.add_blob_digests(self._new_digests)

    def close(self) -> None:
        if self._store is not None and self._owned:
            self._store.close()
