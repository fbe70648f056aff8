"""The tests check: the repository's own tests pass on an isolated copy of the head state.

`check()` takes these steps, in order:

1. The command: refuse an empty one (`tests.no_command`); expand an argument
   that is exactly ``{python}`` to the repository's interpreter (its configured
   ``python`` or ``venv``), else the verifier's own
   (`verifier.checks.tests.runners.interpreter`).
2. The run's folder: a temporary directory holding ``work/`` (the copy),
   ``home/``, ``tmp/`` and our result files (pytest's JUnit report, unittest's
   counts), which lie outside ``work/``; it is removed afterwards.
3. The copy: the head state into ``work/`` (`verifier._internal.snapshot.materialize`):
   the commit's blobs, or the working tree when there is no head commit
   (`tests.snapshot_failed` when that cannot be done). In worktree mode the
   copy must hold, file for file, the bytes the changes check hashed
   (`tests.head_moved` otherwise: the tree changed while it was verified).
   Then, unless the repository turned it off, the files that decide how the
   tests run (pytest's configuration, every ``conftest.py``, the
   ``test_paths``) are put back as they are at the base (`verifier.checks.tests.testinfra`;
   `tests.base_infra_failed` when they cannot be read), each a note. Bytecode is
   removed from the copy (a note) and the native extensions that are not the base's
   are named (`verifier.checks.tests.compiled`): what runs is what was hashed. The
   distributions the base declares as dependencies are read from its blobs
   (`verifier.checks.tests.declared`): pytest loads their trusted plugins by default.
4. The cache: with a `TestResultCache` (the store's), a result kept under
   `verifier.checks.tests.cache.cache_key` (the tree of ``work/`` as it now is,
   the command, the environment, the sandbox settings, the verifier's version)
   is reused instead of running: the details name the session first tested
   (``cached_from``) and a note says so.
5. The launch: how the results are read (docs/runners.md), and the command
   rewritten through our entry for pytest or unittest, whose results come on a
   pipe only we read (`verifier.checks.tests.runners`). For JUnit globs, report
   files already in the copy (committed) are removed first, so only this run's
   reports are read.
6. The run: the command in ``work/`` with a minimal environment (the
   repository's ``bin/`` first on PATH) and a timeout
   (`verifier._internal.sandbox.runner.run`), reading the pipe while it goes.
   The sandbox follows `Config.network_isolation`: ``auto`` uses it when it
   works here, ``required`` makes the check an error when it does not
   (`tests.isolation_unavailable`), ``off`` never uses it; what it covers is
   `verifier.checks.tests.hidden`. A missing program is `tests.runner_not_found`.
7. The reading: the results, as the kind of run says, and for pytest whether
   its sources agree (`verifier.checks.tests.judge.read_results`).
8. The verdict (`verifier.checks.tests.judge`): a timeout, a non-zero exit, no
   test run, every test skipped, failures in the results, or no readable
   results is a failure; a pass with no sandbox under ``auto``, or with no test
   counted, is an error; so is a pass with native code the session changed
   (`tests.native_code_changed`).
9. Keep: a conclusive result is kept under the cache's key. An error is never
   kept, nor a run the verifier killed while stopping: the next verification
   runs the tests again.

`TestsCheck.run` then takes one more: after a run that would pass, it scans the
files the session changed for code that reaches into the test machinery
(`verifier.checks.tests.changed`, with the patterns of
`verifier.checks.tests.tampering`), leaving out what step 3 took from the base
(the result's `BaseInfra` fact): a hit is `tests.tampering_suspected`,
inconclusive, for a person to judge.

Nothing is ever run in the user's repository, and the repository is not
modified (see `verifier._internal.snapshot`). The codes are listed in docs/findings.md.
"""

from __future__ import annotations

import contextvars
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from verifier._internal.cancel import CancelToken
from verifier._internal.git import Git
from verifier._internal.sandbox import runner
from verifier._internal.sandbox.runner import RunnerNotFound, RunOutcome, SandboxUnavailable
from verifier._internal.snapshot import SnapshotError, SnapshotInfo, materialize, temp_parent
from verifier.checks.base import Context, HeadState, Progress, TestResultCache, object_corrupt
from verifier.checks.tests import (
    NAME,
    changed,
    compiled,
    flaky,
    judge,
    monitoring,
    results,
    runners,
)
from verifier.checks.tests.cache import Hit, cache_key, cached, keep, reused, tree_digest
from verifier.checks.tests.declared import declared_distributions
from verifier.checks.tests.differential import BASE_RUNS
from verifier.checks.tests.differential import judge as differential_judge
from verifier.checks.tests.hidden import hidden_paths
from verifier.checks.tests.results import Channel
from verifier.checks.tests.testinfra import BaseInfra, TestInfraError, use_base_test_infra
from verifier.config import Config, RepositoryConfig
from verifier.errors import InfrastructureError, ObjectCorrupt
from verifier.findings import CheckResult, CheckStatus

__all__ = ["CHECK", "NAME", "TestsCheck", "check"]


class TestsCheck:
    """Step 2 of the verdict: the configured tests on a copy of the head state."""

    name = NAME
    title = "Tests"
    prefixes: Mapping[str, str] = {
        "tests.": "the tests check: the repository's test command on the head state",
    }
    launches = True
    reads: tuple[str, ...] = ("changes",)

    def run(self, context: Context) -> CheckResult:
        head = context.fact(HeadState)
        if context.repo_path is None or head is None:
            return CheckResult(
                NAME, CheckStatus.SKIPPED, details={"reason": "no head state to test"}
            )
        task, repository, repo_path = context.task, context.repo, context.repo_path
        differential = repository.baseline == "differential" or (
            task is not None and task.has_acceptance
        )
        per_test = differential or (task is not None and bool(task.pass_to_pass))
        at_head = partial(
            check,
            context.repo_path,
            head.head_commit,
            context.test_command,
            context.test_timeout_s,
            context.config,
            # In worktree mode the copy must hold the bytes the changes check hashed.
            expected_files=head.files if head.mode == "worktree" else None,
            repository=repository,
            cancel=context.cancel,
            base_commit=head.base_commit,
            session_id=context.report.session_id,
            changed_paths=head.changed,
            per_test=per_test,
        )
        scans: dict[BaseInfra | None, Future[changed.Scanned]] = {}
        with ThreadPoolExecutor(2, thread_name_prefix="base") as pool:
            # The base is tested beside the head (its result cached by its tree).
            base = pool.submit(_base_run, context, head.base_commit) if differential else None

            def scan_meanwhile(infra: BaseInfra | None) -> None:
                # The scan needs the session and what the copy took from the base, never
                # the run: it reads and parses while the tests run, under this deadline.
                work = partial(changed.read_and_scan, repo_path, head, infra, repository.test_paths)
                scans[infra] = pool.submit(contextvars.copy_context().run, work)

            result = at_head(
                progress=context.progress,
                on_start=context.launched.set,
                cache=context.test_cache,
                on_copied=scan_meanwhile,
            )
            # A failed test run again on a fresh copy: a flake is told from a failure.
            rerun = partial(_selected, at_head, context.progress, "at the head")
            result = flaky.rerun(
                result, rerun, repository.flaky_reruns, repository.known_flaky, context.config
            )
            if per_test:
                confirm = partial(
                    _selected, _at_base(context, head.base_commit), context.progress, "at the base"
                )
                result = differential_judge(
                    result,
                    None if base is None else base.result(),
                    task,
                    repository,
                    context.config,
                    confirm,
                )
        if result.status is CheckStatus.PASS or _monitored(result):
            # The run passed: was it the code's doing, or did the code reach into the runner?
            infra = next((f for f in result.facts if isinstance(f, BaseInfra)), None)
            made = scans.get(infra)
            result = changed.scan(
                context.repo_path,
                head,
                result,
                infra,
                context.repo.test_paths,
                scanned=None if made is None else made.result(),
            )
        return result


CHECK = TestsCheck()


def _at_base(context: Context, base_commit: str) -> Callable[..., CheckResult]:
    """`check` on the base tree, as on the head: the same command, entry, sandbox and
    limits, each test's end kept; nothing is the session's change there."""
    assert context.repo_path is not None
    return partial(
        check,
        context.repo_path,
        base_commit,
        context.test_command,
        context.test_timeout_s,
        context.config,
        repository=context.repo,
        cancel=context.cancel,
        base_commit=base_commit,
        session_id=context.report.session_id,
        changed_paths=(),
        per_test=True,
    )


def _base_run(context: Context, base_commit: str) -> CheckResult:
    """The base's result: from the cache (the store's, else this process's), or run once
    while sessions on the same base wait (`differential.BASE_RUNS`)."""
    cache = context.test_cache if context.test_cache is not None else BASE_RUNS
    key = "\0".join((str(context.repo_path), base_commit, *context.test_command))
    with BASE_RUNS.lock(key):
        context.progress(f"testing the base {base_commit[:12]} (cached by its tree)")
        return _at_base(context, base_commit)(cache=cache)


def _selected(
    run: Callable[..., CheckResult], progress: Progress, where: str, tests: Sequence[str]
) -> CheckResult:
    """The tests of `tests` run again `where`, on a fresh copy, by their ids."""
    progress(f"running {len(tests)} failed test(s) again {where}")
    return run(select=list(tests), per_test=True)


def _monitored(result: CheckResult) -> bool:
    """A run that would have passed but for what the monitor saw: the scan has its say too."""
    codes = {f.code for f in result.findings}
    return result.status is CheckStatus.ERROR and bool(codes) and codes <= monitoring.CODES


def check(
    repo_path: Path,
    head_commit: str | None,
    command: Sequence[str],
    timeout_s: float,
    config: Config,
    progress: Callable[[str], None] | None = None,
    expected_files: Mapping[str, str] | None = None,
    repository: RepositoryConfig | None = None,
    cancel: CancelToken | None = None,
    on_start: Callable[[], None] | None = None,
    base_commit: str | None = None,
    cache: TestResultCache | None = None,
    session_id: str = "",
    changed_paths: Sequence[str] | None = None,
    *,
    per_test: bool = False,
    select: Sequence[str] | None = None,
    on_copied: Callable[[BaseInfra | None], None] | None = None,
) -> CheckResult:
    """Run the configured test command on a copy of the head state and judge the outcome,
    in the steps of the module's docstring.

    `expected_files` (path -> SHA-256), when given, is what the copy must hold.
    `repository` says how the results are read and which interpreter runs them;
    `cancel` stops the run (its process group killed, `Cancelled` raised);
    `on_start` is called once the test process exists. With `base_commit`, the
    test infrastructure comes from there (`verifier.checks.tests.testinfra`). With `cache`,
    a conclusive result is kept as `session_id`'s, and one kept for the same
    `cache_key` is reused instead of running the tests. `changed_paths`, the paths the
    session changed, tell the monitor which code is new and which data a test must not
    read (`verifier.checks.tests.monitoring`). With `per_test`, the details hold each test's
    end by its id (``outcomes``: the differential classification reads them); with
    `select`, only those test ids run (a rerun of failed tests: pytest through our entry),
    never from the cache nor kept in it. `on_copied` is called once the copy is made,
    with what it took from the base (the scan of the changed files goes on meanwhile).
    """
    if select is not None:
        cache = None
    job = _Job(
        repo_path,
        head_commit,
        command,
        timeout_s,
        config,
        repository or RepositoryConfig(name=""),
        expected_files,
        base_commit,
        cancel,
        on_start,
        None if changed_paths is None else tuple(changed_paths),
        per_test,
        None if select is None else tuple(select),
    )
    started = time.monotonic()
    say = progress or (lambda _line: None)
    try:
        # 1. The command.
        argv, bin_dirs = _command(job)
        # 2. The run's folder.
        with _folder(config) as folder:
            say(f"copying the head state into {folder.root}/")
            # 3. The copy.
            snapshot, infra, infra_notes, native = _copy(job, folder)
            if on_copied is not None:
                on_copied(infra)
            facts = (infra,) if infra is not None else ()
            declared = _declared(job, runners.runs_pytest(argv))
            # 4. The cache.
            key, hit = _lookup(job, cache, folder, snapshot, argv, declared)
            if hit is not None:
                say(f"tests not run: this tree was tested for session {hit[0]}")
                kind = runners.results_kind(argv, job.command, job.repository)
                notes = (*infra_notes, *runners.guarantee_notes(kind))
                kept = reused(hit, job.mode, snapshot, notes)
                kept = replace(kept, facts=kept.facts + facts)
                return judge.timed(_native(kept, native), started)
            # 5. The launch.
            launch = _launch(job, folder, argv, bin_dirs, declared)
            say(f"running tests: {launch.argv} (timeout {timeout_s:g}s)")
            # 6. The run.
            ran = _run(job, folder, launch)
            say(_summary_line(ran.outcome))
            # 7. The reading.
            reading = _read(job, folder, launch, ran)
            # What our entry wrote after a failed run: the trusted plugins it did not load.
            output = ran.outcome.output_excerpt
            not_loaded = runners.not_loaded_note(folder.root, output) if launch.is_pytest else ()
    except _Stop as stop:
        return judge.error(started, stop.code, stop.message, **stop.details)
    except ObjectCorrupt as exc:  # the copy, or the base's tests, read other bytes than an id's
        return judge.timed(object_corrupt(NAME, exc, mode=job.mode), started)
    # 8. The verdict.
    result = judge.verdict(
        ran.outcome,
        reading,
        timeout_s=timeout_s,
        is_pytest=launch.is_pytest,
        mode=job.mode,
        snapshot=snapshot,
        config=config,
        repository=job.repository,
    )
    if job.per_test and reading.kind in ("pytest", "junit"):  # tests known one by one
        # Kept in the cache with the rest: a cached base is classified too.
        result = replace(result, details={**result.details, "outcomes": dict(reading.outcomes)})
    # 9. Keep: a run the verifier killed while stopping (a service's SIGTERM) decided nothing.
    if cache is not None and key is not None and not ran.outcome.stopped:
        keep(cache, key, session_id, result)
    result = _native(result, native)
    notes = (*result.notes, *infra_notes, *runners.guarantee_notes(launch.kind))
    if result.status is CheckStatus.FAIL:
        notes = (*notes, *not_loaded)
    return judge.timed(replace(result, notes=notes, facts=result.facts + facts), started)


def _native(result: CheckResult, native: list[str]) -> CheckResult:
    """A pass with native code the session changed is inconclusive (`compiled`); a failure
    names that code in its details, for the guards of a failure excused later."""
    if native and result.status is CheckStatus.FAIL:
        return replace(result, details={**result.details, "native_changed": native})
    return compiled.inconclusive(result, native)


@dataclass(frozen=True)
class _Job:
    """What `check` was asked: the head state to test, and the command and how it runs."""

    repo_path: Path
    head_commit: str | None
    command: Sequence[str]
    timeout_s: float
    config: Config
    repository: RepositoryConfig
    expected_files: Mapping[str, str] | None
    base_commit: str | None
    cancel: CancelToken | None
    on_start: Callable[[], None] | None
    changed: tuple[str, ...] | None
    per_test: bool = False
    select: tuple[str, ...] | None = None

    @property
    def mode(self) -> str:
        return "worktree" if self.head_commit is None else "commit"


class _Stop(Exception):
    """A step that cannot be carried out: the check is an error with this code and these
    details (what is known at that point), returned by `check`, the one place that catches it."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details


def _command(job: _Job) -> tuple[list[str], list[Path]]:
    """Step 1: the command with ``{python}`` expanded, and the folders to put first on PATH."""
    if not job.command:
        raise _Stop(
            "tests.no_command",
            "no test command for this repository: configure "
            "repositories.<name>.test_command or pass --test-command",
        )
    python, bin_dirs = runners.interpreter(job.repository)
    return [python if arg == "{python}" else arg for arg in job.command], bin_dirs


@dataclass(frozen=True)
class _Folder:
    """The run's temporary folder: the copy, the child's HOME and TMPDIR, our result files."""

    root: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def junit(self) -> Path:
        return self.root / "junit.xml"


@contextmanager
def _folder(config: Config) -> Iterator[_Folder]:
    """Step 2: the run's folder, removed afterwards."""
    # In memory when it has room: writing thousands of small files to a disk costs more
    # than reading them from git.
    parent = temp_parent(config.max_snapshot_bytes)
    with tempfile.TemporaryDirectory(
        prefix="verifier-tests-", dir=parent, ignore_cleanup_errors=True
    ) as td:
        folder = _Folder(Path(td))
        folder.home.mkdir()
        folder.tmp.mkdir()
        yield folder


def _copy(
    job: _Job, folder: _Folder
) -> tuple[SnapshotInfo, BaseInfra | None, tuple[str, ...], list[str]]:
    """Step 3: the head state copied into ``work/``, as the changes check read it, with the
    test infrastructure of the base and no bytecode: what came from the base (None:
    nothing was taken), the notes saying so and what bytecode was removed, and the
    native files that are not the base's."""
    config, repository = job.config, job.repository
    try:
        snapshot = materialize(
            job.repo_path,
            job.head_commit,
            folder.work,
            max_bytes=config.max_snapshot_bytes,
            max_files=config.max_snapshot_files,
        )
    except SnapshotError as exc:
        raise _Stop("tests.snapshot_failed", str(exc), mode=job.mode) from None
    if job.expected_files is not None:
        moved = _moved(job.expected_files, snapshot.entries)
        if moved:
            raise _Stop(
                "tests.head_moved",
                f"the working tree changed while it was verified: {moved[0]!r}"
                + (f" and {len(moved) - 1} more" if len(moved) > 1 else "")
                + " differ between the changes check and the copy for the tests",
                mode=job.mode,
            )
    infra: BaseInfra | None = None
    if job.base_commit is not None and repository.test_infra_from_base:
        try:
            infra = use_base_test_infra(
                job.repo_path,
                job.base_commit,
                folder.work,
                test_paths=repository.test_paths,
                trusted_ref=repository.trusted_ref,
            )
        except TestInfraError as exc:
            raise _Stop("tests.base_infra_failed", str(exc), mode=job.mode) from None
    found = compiled.scan_copy(folder.work)
    try:
        native = compiled.changed_native(job.repo_path, job.base_commit, folder.work, found.native)
    except compiled.NativeReadError as exc:
        raise _Stop("tests.base_infra_failed", str(exc), mode=job.mode) from None
    taken = infra.notes if infra is not None else ()
    notes = (*taken, *compiled.strip_bytecode(folder.work, found))
    return snapshot, infra, notes, native


def _moved(expected: Mapping[str, str], copied: Mapping[str, str]) -> list[str]:
    """Paths whose bytes, mode or link target differ between two reads of the working tree."""
    ours = {os.fsencode(p).decode("utf-8", "backslashreplace"): d for p, d in copied.items()}
    return sorted(p for p in expected.keys() | ours.keys() if expected.get(p) != ours.get(p))


def _declared(job: _Job, pytest: bool) -> tuple[str, ...]:
    """The distributions the base (or the trusted ref's tip, as for the test
    infrastructure) declares as dependencies: their trusted pytest plugins load by default
    (`verifier.checks.tests.declared`). None without a base, for a command that does not
    run pytest, or when the repository names its plugins itself."""
    repository = job.repository
    if job.base_commit is None or repository.pytest_plugins is not None or not pytest:
        return ()
    source = repository.trusted_ref if repository.trusted_ref is not None else job.base_commit
    try:
        return declared_distributions(job.repo_path, source)
    except TestInfraError as exc:
        raise _Stop("tests.base_infra_failed", str(exc), mode=job.mode) from None


def _lookup(
    job: _Job,
    cache: TestResultCache | None,
    folder: _Folder,
    snapshot: SnapshotInfo,
    argv: Sequence[str],
    declared: Sequence[str],
) -> tuple[str | None, Hit | None]:
    """Step 4: the key of this run in `cache` (`cache_key`, of the copy as it now is, and
    the plugins the base declares), and the result kept under it; neither without a cache."""
    if cache is None:
        return None, None
    tree = tree_digest(folder.work, snapshot, job.repository.test_paths)
    # What the monitor is told depends on the base too, not only on the tree: the changed
    # files (an old file's events count only below a changed one) and the data among them.
    changed, test_paths = job.changed or (), job.repository.test_paths
    watched = [
        *(f"watch:{p}" for p in monitoring.watched(changed, test_paths)),
        *(f"changed:{p}" for p in monitoring.code(changed, test_paths)),
    ]
    key = cache_key(
        tree,
        job.command,
        argv,
        job.timeout_s,
        job.config,
        job.repository,
        watched=watched,
        declared=declared,
        per_test=job.per_test,
    )
    return key, cached(cache, key)


@dataclass(frozen=True)
class _Launch:
    """What step 5 decided: the command as it runs, its environment and the folders of its
    interpreter, how its results are read (`kind`, and `read` for the details), and
    the pipe our entry reports on."""

    argv: list[str]
    env: dict[str, str]
    bin_dirs: list[Path]
    kind: str
    is_pytest: bool
    read: dict[str, Any]
    events: tuple[int, int] | None  # the pipe's read and write ends


def _launch(
    job: _Job, folder: _Folder, argv: list[str], bin_dirs: list[Path], declared: Sequence[str]
) -> _Launch:
    """Step 5: how the results are read, and the command through our entry for them (for
    pytest, with the distributions the base `declared`)."""
    repository = job.repository
    kind = runners.results_kind(argv, job.command, repository)
    is_pytest = runners.runs_pytest(argv)
    read: dict[str, Any] = {"source": kind}
    if kind in judge.GUARANTEE:
        read["guarantee"] = judge.GUARANTEE[kind]
    env = runners.child_env(folder.home, folder.tmp, bin_dirs, repository)
    events = os.pipe() if kind in ("pytest", "unittest") else None
    if kind == "pytest" and events is not None:
        argv = runners.with_pytest_entry(
            argv,
            folder.root,
            folder.junit,
            events[1],
            env["PATH"],
            repository.pytest_plugins,
            untrusted=[job.repo_path.resolve()],
            declared=declared,
            select=job.select,
        )
        _monitor(job, folder, folder.root / "runner")
    elif kind == "unittest" and events is not None:
        argv = runners.with_unittest_entry(argv, folder.root, events[1])
        _monitor(job, folder, folder.root)
    elif kind == "junit":
        read["globs"] = list(repository.results_junit)
        read["removed_before_run"] = results.prepare_reports(folder.work, repository.results_junit)
    return _Launch(argv, env, bin_dirs, kind, is_pytest, read, events)


def _monitor(job: _Job, folder: _Folder, entry_folder: Path) -> None:
    """The monitor and its settings beside our entry (`verifier.checks.tests.monitoring`)."""
    paths = job.repository.test_paths
    reader = (
        None if job.base_commit is None else partial(_base_bytes, job.repo_path, job.base_commit)
    )
    monitoring.prepare(entry_folder, folder.work, paths, job.changed, folder.junit, reader)


def _base_bytes(repo_path: Path, commit: str, paths: Sequence[str]) -> dict[str, bytes]:
    """The bytes at `commit` of those of `paths` it has (every blob checked against its id).
    When git cannot say, none: every line of those files then counts as new."""
    git = Git(repo_path, error=TestInfraError)
    ids: dict[str, str] = {}
    try:
        listing = git.run("ls-tree", "-z", "--full-tree", commit, "--", *paths)
        for record in listing.split(b"\0"):
            meta, _, raw = record.partition(b"\t")
            parts = meta.decode("ascii", "replace").split(" ")
            if len(parts) == 3 and parts[1] == "blob" and os.fsdecode(raw) in paths:
                ids[os.fsdecode(raw)] = parts[2]
        with git.cat_file(list(ids.values())) as batch:
            return {path: batch.read(oid) for path, oid in ids.items()}
    except ObjectCorrupt:
        raise
    except InfrastructureError:
        return {}


@dataclass(frozen=True)
class _Ran:
    """What step 6 ended with: the run's outcome, what came through our entry's pipe, and
    whether bytes were dropped from it."""

    outcome: RunOutcome
    events: bytes
    overflowed: bool


def _run(job: _Job, folder: _Folder, launch: _Launch) -> _Ran:
    """Step 6: the run, in the sandbox, with our entry's pipe read while it goes."""
    config, repository, argv = job.config, job.repository, launch.argv
    channel = Channel(launch.events[0]) if launch.events is not None else None
    events = b""
    try:
        outcome = runner.run(
            argv,
            cwd=folder.work,
            timeout_s=job.timeout_s,
            env=launch.env,
            sandbox=config.network_isolation,
            excerpt_bytes=config.output_excerpt_bytes,
            hide=hidden_paths(
                job.repo_path,
                config,
                keep=[folder.root, Path(argv[0]), *launch.bin_dirs, *runners.venv(repository)],
            ),
            writable=[folder.root],
            cancel=job.cancel,
            on_start=job.on_start,
            read_only=[*config.sandbox_read_only, *repository.read_only_paths, *launch.bin_dirs],
            limits=config.limits,
            pass_fds=(launch.events[1],) if launch.events is not None else (),
        )
    except SandboxUnavailable as exc:
        raise _Stop("tests.isolation_unavailable", str(exc), argv=argv, mode=job.mode) from None
    except RunnerNotFound as exc:
        raise _Stop("tests.runner_not_found", str(exc), argv=argv, mode=job.mode) from None
    except InfrastructureError as exc:
        raise _Stop("tests.runner_failed", str(exc), argv=argv, mode=job.mode) from None
    finally:
        if channel is not None and launch.events is not None:
            os.close(launch.events[1])  # the run is over: the pipe ends once its writers are gone
            events = channel.close()
    return _Ran(outcome, events, channel is not None and channel.overflowed)


def _summary_line(outcome: RunOutcome) -> str:
    if outcome.timed_out:
        return f"tests killed at the timeout after {outcome.duration_s:.1f}s"
    return f"tests finished: exit code {outcome.exit_code} in {outcome.duration_s:.1f}s"


def _read(job: _Job, folder: _Folder, launch: _Launch, ran: _Ran) -> judge.Reading:
    """Step 7: the run's results, as the kind of run says they are read."""
    return judge.read_results(
        launch.kind,
        launch.read,
        ran.outcome,
        folder.work,
        folder.junit,
        ran.events,
        ran.overflowed,
        job.repository,
    )
