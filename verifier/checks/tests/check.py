"""The tests check: the repository's own tests pass on an isolated copy of the head state.

`check()` takes these steps, in order:

1. Refuse an empty command (`tests.no_command`); expand an argument that is
   exactly ``{python}`` to the repository's interpreter (its configured
   ``python`` or ``venv``), else the verifier's own.
2. Decide the sandbox from `Config.network_isolation`: ``auto`` uses it when
   it works here, ``required`` fails the check as an error when it does not
   (`tests.isolation_unavailable`), ``off`` never uses it. A run that passed
   with no sandbox under ``auto`` is an error (`tests.unsandboxed`); under
   ``off``, the operator's choice, it passes with a note.
3. Make a temporary directory holding ``work/`` (the copy), ``home/``, ``tmp/``
   and our result files (pytest's JUnit report, unittest's counts), which lie
   outside ``work/``; it is removed afterwards.
4. Copy the head state into ``work/`` (`verifier._internal.snapshot.materialize`):
   the commit's blobs, or the working tree when there is no head commit
   (`tests.snapshot_failed` when that cannot be done). In worktree mode the
   copy must hold, file for file, the bytes the changes check hashed
   (`tests.head_moved` otherwise: the tree changed while it was verified).
   Then, unless the repository turned it off, the files that decide how the
   tests run (pytest's configuration, every ``conftest.py``, the
   ``test_paths``) are put back as they are at the base (`verifier.checks.tests.testinfra`;
   `tests.base_infra_failed` when they cannot be read), each a note.
5. Decide how the results are read (docs/runners.md): the repository's
   ``results`` (``{ junit = [globs] }`` or ``"exit-code"``), else by the command.
   pytest runs through our entry (`verifier.checks.tests.entries.pytest_entry`) with the same
   interpreter, which loads pytest before the repository's root is on the path
   and registers our plugin (`verifier.checks.tests.entries.pytest_reporter`): it reports each test
   as it finishes, and the session's end, on a pipe whose read end only we
   hold; pytest also gets ``--junitxml=<tmp>/junit.xml`` and
   ``-p no:cacheprovider``. ``python -m unittest`` runs through our entry
   (`verifier.checks.tests.entries.unittest_entry`), which sends unittest's counts on such a pipe
   when the run stops. For JUnit
   globs, report files already in the copy (committed) are removed first, so
   only this run's reports are read.
6. Run the command in ``work/`` with a minimal environment (the repository's
   ``bin/`` first on PATH) and a timeout (`verifier._internal.sandbox.runner.run`), reading the
   pipe while it goes; a missing program is `tests.runner_not_found`.
7. Read the results (`verifier.checks.tests.results`) and judge: a timeout, a non-zero exit,
   no test run, every test skipped, failures in the results, or no readable
   results is a failure. The exit code decides before any text the run
   printed. For pytest, a session that never finished (``os._exit``, a signal,
   a crash) is `tests.no_session_finish`, and the exit status, the plugin's
   per-test outcomes, the JUnit report and pytest's closing summary line must
   agree (`tests.results_disagree`). A run whose tests are not counted is an
   error (`tests.uncounted`), never a pass, unless the repository opted in to
   ``results = "exit-code"``.
   With a `TestResultCache` (the store's), a conclusive result is kept under
   `cache_key` (the tree of ``work/`` as it now is, the command, the
   environment, the sandbox settings, the verifier's version) and, when that
   key was decided before, reused instead of running: the details name the
   session first tested (``cached_from``) and a note says so. An error is
   never kept: the next verification runs the tests again.
8. After a run that would pass, scan the files the session changed for code
   that reaches into the test machinery (`verifier.checks.tests.tampering`): a hit is
   `tests.tampering_suspected`, inconclusive, for a person to judge.

Nothing is ever run in the user's repository, and the repository is not
modified (see `verifier._internal.snapshot`). The codes are listed in docs/findings.md.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import os
import platform
import shutil
import stat
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from verifier import __version__
from verifier._internal.cancel import CancelToken
from verifier._internal.git import Git
from verifier._internal.sandbox import runner
from verifier._internal.sandbox.runner import RunnerNotFound, RunOutcome, SandboxUnavailable
from verifier._internal.snapshot import SnapshotError, SnapshotInfo, materialize, temp_parent
from verifier.checks.base import Context, HeadState, TestResultCache
from verifier.checks.tests import results, tampering
from verifier.checks.tests.results import Channel, OutcomeCounts, PytestRun, UnreadableResults
from verifier.checks.tests.testinfra import TestInfraError, is_test_infra, use_base_test_infra
from verifier.config import Config, RepositoryConfig
from verifier.errors import InfrastructureError
from verifier.findings import CheckResult, CheckStatus, Finding
from verifier.resources import tampering_patterns_file

__all__ = ["NAME", "cache_key", "check", "tree_digest"]

NAME = "tests"
# pytest's "no tests collected"; unittest's "no tests ran" since Python 3.12.
NO_TESTS_EXIT_CODE = 5
_ENTRIES = Path(__file__).resolve().parent / "entries"
_UNITTEST_ENTRY = _ENTRIES / "unittest_entry.py"
_PYTEST_ENTRY = (_ENTRIES / "pytest_entry.py", _ENTRIES / "pytest_reporter.py")
# Where each kind of run's counts come from, as findings name it.
_SOURCE = {
    "pytest": "our pytest plugin",
    "unittest": "unittest's result",
    "junit": "the JUnit reports",
}
# How far each kind of run's results can be trusted, as the verdict's details say.
_GUARANTEE = {
    "pytest": "reported by our plugin as each test finished, on a pipe only the verifier "
    "reads; checked against the exit status, the JUnit report and the summary line",
    "unittest": "reported by our entry when the run stopped, on a pipe only the verifier reads",
    "junit": "files the command wrote",
    "exit-code": "the exit code alone",
}


class TestsCheck:
    """Step 2 of the verdict: the configured tests on a copy of the head state."""

    name = NAME
    launches = True
    reads: tuple[str, ...] = ("changes",)

    def run(self, context: Context) -> CheckResult:
        head = context.fact(HeadState)
        if context.repo_path is None or head is None:
            return CheckResult(
                NAME, CheckStatus.SKIPPED, details={"reason": "no head state to test"}
            )
        result = check(
            context.repo_path,
            head.head_commit,
            context.test_command,
            context.test_timeout_s,
            context.config,
            progress=context.progress,
            # In worktree mode the copy must hold the bytes the changes check hashed.
            expected_files=head.files if head.mode == "worktree" else None,
            repository=context.repo,
            cancel=context.cancel,
            on_start=context.launched.set,
            base_commit=head.base_commit,
            cache=context.test_cache,
            session_id=context.report.session_id,
        )
        if result.status is CheckStatus.PASS:
            # The run passed: was it the code's doing, or did the code reach into the runner?
            result = _tampering_scan(context.repo_path, head, result)
        return result


CHECK = TestsCheck()


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
) -> CheckResult:
    """Run the configured test command on a copy of the head state and judge the outcome.

    `expected_files` (path -> SHA-256), when given, is what the copy must hold.
    `repository` says how the results are read and which interpreter runs them;
    `cancel` stops the run (its process group killed, `Cancelled` raised);
    `on_start` is called once the test process exists. With `base_commit`, the
    test infrastructure comes from there (`verifier.checks.tests.testinfra`). With `cache`,
    a conclusive result is kept as `session_id`'s, and one kept for the same
    `cache_key` is reused instead of running the tests.
    """
    repo_config = repository or RepositoryConfig(name="")
    started = time.monotonic()
    say = progress or (lambda _line: None)
    mode = "worktree" if head_commit is None else "commit"
    if not command:
        return _error(
            started,
            "tests.no_command",
            "no test command for this repository: configure "
            "repositories.<name>.test_command or pass --test-command",
        )
    python, bin_dirs = _interpreter(repo_config)
    argv = [python if arg == "{python}" else arg for arg in command]

    # In memory when it has room: writing thousands of small files to a disk costs more
    # than reading them from git.
    parent = temp_parent(config.max_snapshot_bytes)
    with tempfile.TemporaryDirectory(
        prefix="verifier-tests-", dir=parent, ignore_cleanup_errors=True
    ) as td:
        tmp = Path(td)
        say(f"copying the head state into {tmp}/")
        work, home, child_tmp = tmp / "work", tmp / "home", tmp / "tmp"
        home.mkdir()
        child_tmp.mkdir()
        junit = tmp / "junit.xml"

        try:
            snapshot = materialize(
                repo_path,
                head_commit,
                work,
                max_bytes=config.max_snapshot_bytes,
                max_files=config.max_snapshot_files,
            )
        except SnapshotError as exc:
            return _error(started, "tests.snapshot_failed", str(exc), mode=mode)
        if expected_files is not None:
            moved = _moved(expected_files, snapshot.entries)
            if moved:
                return _error(
                    started,
                    "tests.head_moved",
                    f"the working tree changed while it was verified: {moved[0]!r}"
                    + (f" and {len(moved) - 1} more" if len(moved) > 1 else "")
                    + " differ between the changes check and the copy for the tests",
                    mode=mode,
                )
        try:
            infra_notes = _base_test_infra(repo_path, base_commit, work, repo_config)
        except TestInfraError as exc:
            return _error(started, "tests.base_infra_failed", str(exc), mode=mode)

        key = None
        if cache is not None:
            tree = tree_digest(work, snapshot, repo_config.test_paths)
            key = cache_key(tree, command, argv, timeout_s, config, repo_config)
            hit = _cache_get(cache, key)
            if hit is not None:
                say(f"tests not run: this tree was tested for session {hit[0]}")
                return _timed(_from_cache(hit, mode, snapshot, infra_notes), started)

        kind, is_pytest = _results_kind(argv, command, repo_config), _runs_pytest(argv)
        read: dict[str, Any] = {"source": kind}
        if kind in _GUARANTEE:
            read["guarantee"] = _GUARANTEE[kind]
        env = _child_env(home, child_tmp, bin_dirs, repo_config)
        piped = kind in ("pytest", "unittest")
        events_r, events_w = os.pipe() if piped else (-1, -1)
        if kind == "pytest":
            argv = _with_pytest_entry(argv, tmp, junit, events_w, env["PATH"])
        elif kind == "unittest":
            argv = _with_unittest_entry(argv, tmp, events_w)
        elif kind == "junit":
            read["globs"] = list(repo_config.results_junit)
            read["removed_before_run"] = results.prepare_reports(work, repo_config.results_junit)

        say(f"running tests: {argv} (timeout {timeout_s:g}s)")
        channel, events = (Channel(events_r) if piped else None), b""
        try:
            outcome = runner.run(
                argv,
                cwd=work,
                timeout_s=timeout_s,
                env=env,
                sandbox=config.network_isolation,
                excerpt_bytes=config.output_excerpt_bytes,
                hide=_hidden_paths(
                    repo_path, config, keep=[tmp, Path(argv[0]), *bin_dirs, *_venv(repo_config)]
                ),
                writable=[tmp],
                cancel=cancel,
                on_start=on_start,
                read_only=[*config.sandbox_read_only, *repo_config.read_only_paths, *bin_dirs],
                limits=config.limits,
                pass_fds=(events_w,) if channel is not None else (),
            )
        except SandboxUnavailable as exc:
            return _error(started, "tests.isolation_unavailable", str(exc), argv=argv, mode=mode)
        except RunnerNotFound as exc:
            return _error(started, "tests.runner_not_found", str(exc), argv=argv, mode=mode)
        except InfrastructureError as exc:
            return _error(started, "tests.runner_failed", str(exc), argv=argv, mode=mode)
        finally:
            if channel is not None:
                os.close(events_w)  # the run is over: the pipe ends once its writers are gone
                events = channel.close()
        say(_summary_line(outcome))

        counts, report_problem = _read_results(kind, work, junit, events, repo_config, read)
        agreement = None
        if kind == "pytest":
            run = results.read_pytest_events(events)
            overflowed = channel is not None and channel.overflowed
            agreement = _agreement(run, overflowed, counts, report_problem, outcome, read)
            counts = run.counts
    findings = _judge(outcome, timeout_s, kind, is_pytest, counts, report_problem, agreement)
    details = _details(outcome, mode, snapshot, counts, read)
    if not findings and outcome.sandbox == "none" and config.network_isolation == "auto":
        # A pass proved nothing about code that could read and write the whole host;
        # a failure stays a failure.
        return _timed(
            CheckResult(
                NAME, CheckStatus.ERROR, (_unsandboxed(outcome),), details, notes=infra_notes
            ),
            started,
        )
    if outcome.sandbox == "none" and config.network_isolation == "off":
        isolation: tuple[str, ...] = ('network_isolation = "off": nothing was isolated',)
    else:
        isolation = ()
    if not findings and kind == "uncounted":
        # Exit 0 from a runner we cannot count proves nothing ran ("Ran 0 tests"
        # exits 0 too): the question stays open rather than passing.
        where = f"[repositories.{repo_config.name or '<name>'}]"
        uncounted = Finding(
            "tests.uncounted",
            f"{os.path.basename(argv[0])!r} exited 0, but its tests were not counted: in "
            f'{where} set results = {{ junit = ["reports/*.xml"] }} for a runner that '
            'writes JUnit XML, or results = "exit-code" to accept the exit code alone '
            "(docs/runners.md)",
            expected="a counted test run",
            found="exit code 0, tests not counted",
        )
        return _timed(
            CheckResult(
                NAME, CheckStatus.ERROR, (uncounted,), details, notes=(*isolation, *infra_notes)
            ),
            started,
        )
    result = CheckResult.from_findings(NAME, findings, details)
    if kind == "exit-code":
        note = 'tests not counted: results = "exit-code" judges the run by its exit code alone'
        result = replace(result, notes=(note,))
    result = replace(result, notes=(*result.notes, *isolation))
    # A run the verifier killed while stopping (a service's SIGTERM) decided nothing.
    if cache is not None and key is not None and not outcome.stopped:
        _cache_put(cache, key, session_id, result)
    return _timed(replace(result, notes=result.notes + infra_notes), started)


def tree_digest(work: Path, snapshot: SnapshotInfo, test_paths: Sequence[str]) -> str:
    """SHA-256 over every file and link of the copy as the tests will see it: its
    path, its permission bits and the SHA-256 of its bytes, or its link target.

    Read after the test infrastructure came from the base (`verifier.checks.tests.testinfra`),
    so two heads that differ only in tests that are not run are the same tree.
    A file the copy wrote is taken from `snapshot`'s digests; only test
    infrastructure (which the base may have replaced) and files it does not know
    are read again.
    """
    digest = hashlib.sha256()
    for folder, dirs, names in os.walk(work):
        dirs.sort()
        rel_folder = Path(folder).relative_to(work)
        for name in sorted([*names, *(d for d in dirs if (Path(folder) / d).is_symlink())]):
            path = Path(folder) / name
            rel = (rel_folder / name).as_posix()
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                entry = f"link {os.readlink(path)}"
            else:
                known = None if is_test_infra(rel, test_paths) else snapshot.digests.get(rel)
                if known is None:
                    with open(path, "rb") as fh:
                        known = hashlib.file_digest(fh, "sha256").hexdigest()
                entry = f"file {stat.S_IMODE(info.st_mode):o} {known}"
            digest.update(os.fsencode(rel) + b"\0" + entry.encode("utf-8", "surrogateescape"))
            digest.update(b"\0")
    return digest.hexdigest()


def cache_key(
    tree: str,
    command: Sequence[str],
    argv: Sequence[str],
    timeout_s: float,
    config: Config,
    repository: RepositoryConfig,
) -> str:
    """SHA-256 over what decides a test run's result: the tree tested (`tree_digest`),
    the command as configured and as run, its timeout and how its results are read,
    the environment (interpreters, their installed packages, PATH, the platform),
    the sandbox settings, and the verifier's version."""
    interpreter = argv[0] if argv else ""
    decided = {
        "tree": tree,
        "command": list(command),
        "argv": list(argv),
        "timeout_s": timeout_s,
        "results": [repository.results, list(repository.results_junit)],
        "environment": {
            "python": interpreter,
            "python_resolved": os.path.realpath(interpreter) if interpreter else "",
            "verifier_python": [sys.executable, sys.version],
            "python_config": str(repository.python) if repository.python else None,
            "venv": str(repository.venv) if repository.venv else None,
            "site_packages": _site_packages(repository),
            "path": os.environ.get("PATH") or runner.DEFAULT_PATH,
            "platform": [platform.platform(), platform.machine()],
        },
        "sandbox": {
            "network_isolation": config.network_isolation,
            "limits": _limits(config),
            "read_only": [str(p) for p in (*config.sandbox_read_only, *repository.read_only_paths)],
            "output_excerpt_bytes": config.output_excerpt_bytes,
        },
        "verifier": __version__,
    }
    encoded = json.dumps(decided, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def _limits(config: Config) -> dict[str, int]:
    limits = config.limits
    return {
        "memory_mb": limits.memory_mb,
        "processes": limits.processes,
        "open_files": limits.open_files,
        "file_size_mb": limits.file_size_mb,
        "cpu_s": limits.cpu_s,
        "tmp_mb": limits.tmp_mb,
    }


def _site_packages(repository: RepositoryConfig) -> dict[str, int]:
    """When each interpreter's installed packages last changed (a folder's mtime moves
    when a package is installed or removed): a new dependency is a new environment."""
    if repository.venv is not None:
        folders = glob.glob(str(repository.venv / "lib" / "python*" / "site-packages"))
    else:
        folders = [sysconfig.get_paths()["purelib"]]
    stamps: dict[str, int] = {}
    for folder in sorted(folders):
        try:
            stamps[folder] = os.stat(folder).st_mtime_ns
        except OSError:
            stamps[folder] = -1
    return stamps


def _cache_get(cache: TestResultCache, key: str) -> tuple[str, Mapping[str, Any]] | None:
    """A kept result that reads as one (`_from_cache`), or None: a cache never decides."""
    hit = cache.get(key)
    if hit is None:
        return None
    session_id, kept = hit
    if not isinstance(kept, Mapping) or kept.get("status") not in ("pass", "fail"):
        return None
    findings = kept.get("findings")
    if not isinstance(findings, list) or not all(isinstance(f, Mapping) for f in findings):
        return None
    return session_id, kept


def _from_cache(
    hit: tuple[str, Mapping[str, Any]],
    mode: str,
    snapshot: SnapshotInfo,
    infra_notes: tuple[str, ...],
) -> CheckResult:
    """The result kept for this tree, with this copy's own facts and notes."""
    session_id, kept = hit
    findings = tuple(
        Finding(
            str(f["code"]),
            str(f["message"]),
            **{k: str(f[k]) for k in ("path", "expected", "found") if f.get(k) is not None},
        )
        for f in kept["findings"]
    )
    details = dict(kept.get("details") or {})
    details.update(mode=mode, snapshot=_snapshot_details(snapshot), cached_from=session_id)
    note = (
        f"tests not run: this tree was tested under the same command, environment and "
        f"sandbox for session {session_id}, and its result is reused (cached_from)"
    )
    notes = tuple(str(n) for n in kept.get("notes") or ())
    return CheckResult(
        NAME, CheckStatus(kept["status"]), findings, details, notes=(*notes, *infra_notes, note)
    )


def _cache_put(cache: TestResultCache, key: str, session_id: str, result: CheckResult) -> None:
    """Keep a conclusive result: a pass or a failure, never an error."""
    if result.status not in (CheckStatus.PASS, CheckStatus.FAIL):
        return
    kept = result.to_dict()
    kept["details"] = {k: v for k, v in kept["details"].items() if k not in ("mode", "snapshot")}
    cache.put(key, session_id, kept)


# Credentials of the verifier's user that the code under test has no business reading.
CREDENTIALS = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".docker",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".config/git",
    ".pgpass",
    ".netrc",
    ".git-credentials",
    ".gitconfig",
    ".pypirc",
)


def _base_test_infra(
    repo_path: Path, base: str | None, work: Path, repository: RepositoryConfig
) -> tuple[str, ...]:
    """The copy's test infrastructure as at the base (or trusted ref); the notes say what moved."""
    if base is None or not repository.test_infra_from_base:
        return ()
    return use_base_test_infra(
        repo_path,
        base,
        work,
        test_paths=repository.test_paths,
        trusted_ref=repository.trusted_ref,
    )


def _hidden_paths(repo_path: Path, config: Config, keep: Sequence[Path]) -> list[Path]:
    """What the sandbox covers: the checked repository, our configuration and database,
    and the user's credential files; never a path that holds what the run needs."""
    candidates = [
        repo_path.resolve(),
        Path.home() / ".local" / "share" / "verifier",
        config.mirror_cache.resolve(),  # every repository's mirror, not only this one
    ]
    if config.source is not None:
        candidates.append(config.source.resolve())
    scheme, _, rest = config.database_url.partition(":///")
    db_name = rest.split("?")[0]
    if db_name.startswith("file:"):  # SQLite's URI form (`?uri=true`): file:/a, file:///a, file:a
        db_name = unquote(db_name.removeprefix("file:"))
        db_name = "/" + db_name[2:].partition("/")[2] if db_name.startswith("//") else db_name
    if scheme.split("+")[0] == "sqlite" and db_name and not db_name.startswith(":memory:"):
        database = Path(db_name).resolve()  # relative: to our working folder
        candidates += [database, Path(f"{database}-wal"), Path(f"{database}-shm")]
    candidates += [Path.home() / name for name in CREDENTIALS]
    needed = [
        p.resolve() for p in (*keep, Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix))
    ]
    return [c for c in candidates if not any(n == c or n.is_relative_to(c) for n in needed)]


def _moved(expected: Mapping[str, str], copied: Mapping[str, str]) -> list[str]:
    """Paths whose bytes, mode or link target differ between two reads of the working tree."""
    ours = {os.fsencode(p).decode("utf-8", "backslashreplace"): d for p, d in copied.items()}
    return sorted(p for p in expected.keys() | ours.keys() if expected.get(p) != ours.get(p))


def _runs_pytest(argv: Sequence[str]) -> bool:
    name = os.path.basename(argv[0])
    if name.startswith(("pytest", "py.test")):
        return True
    pairs = itertools.pairwise(argv)
    return "-mpytest" in argv or any(a == "-m" and b == "pytest" for a, b in pairs)


def _with_pytest_options(argv: list[str], junit: Path) -> list[str]:
    """Add our options last (pytest keeps the last --junitxml), but before a ``--``."""
    ours = [f"--junitxml={junit}", "-p", "no:cacheprovider"]
    at = argv.index("--") if "--" in argv[1:] else len(argv)
    return [*argv[:at], *ours, *argv[at:]]


def _with_pytest_entry(
    argv: Sequence[str], tmp: Path, junit: Path, fd: int, search_path: str
) -> list[str]:
    """The same interpreter, its options and pytest's arguments, through our entry.

    ``PYTHON [OPTIONS] -m pytest ARGS`` becomes ``PYTHON [OPTIONS] -s ENTRY FD ARGS``;
    a ``pytest`` script found on the PATH runs with the Python its ``#!`` line
    names. A script inside the copy (``./pytest-x``) is the repository's own
    runner and runs as it is. The entry and our plugin are copied into a folder of
    their own outside the copy: the sandbox may cover our package.
    """
    folder = tmp / "runner"
    folder.mkdir()
    for source in _PYTEST_ENTRY:
        shutil.copyfile(source, folder / source.name)
    entry = str(folder / _PYTEST_ENTRY[0].name)
    module = next(
        (i for i, (a, b) in enumerate(itertools.pairwise(argv)) if a == "-m" and b == "pytest"),
        None,
    )
    if module is not None:
        launch, args = list(argv[:module]), list(argv[module + 2 :])
    elif "-mpytest" in argv:
        at = list(argv).index("-mpytest")
        launch, args = list(argv[:at]), list(argv[at + 1 :])
    else:
        interpreter = _script_interpreter(argv[0], search_path)
        if interpreter is None:
            # The repository's own runner, or not Python: it runs as configured, and
            # without our plugin its session can never be shown to have finished.
            return _with_pytest_options(list(argv), junit)
        launch, args = [interpreter], list(argv[1:])
    return [*launch, "-s", entry, str(fd), *_with_pytest_options(["pytest", *args], junit)[1:]]


def _script_interpreter(script: str, search_path: str) -> str | None:
    """The Python a script's ``#!`` line names (``env NAME`` looked up on the child's
    PATH); None for a path relative to the copy, or an interpreter that is not Python."""
    if "/" in script and not os.path.isabs(script):
        return None
    found = script if "/" in script else shutil.which(script, path=search_path)
    if found is None:
        return None
    try:
        with open(found, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if len(words) >= 2 and os.path.basename(words[0]) == "env":
        interpreter = shutil.which(words[1], path=search_path)
    else:
        interpreter = words[0] if words and os.path.isabs(words[0]) else None
    if interpreter is None or not os.path.basename(interpreter).startswith(("python", "pypy")):
        return None
    return interpreter


def _interpreter(repository: RepositoryConfig) -> tuple[str, list[Path]]:
    """What ``{python}`` stands for, and the folders to put first on the child's PATH."""
    if repository.venv is not None:
        bin_dir = repository.venv / "bin"
        return str(bin_dir / "python"), [bin_dir]
    if repository.python is not None:
        # Not resolved: a venv's python is a link, and the venv is found through it.
        return str(repository.python), [repository.python.parent]
    return sys.executable, []


def _venv(repository: RepositoryConfig) -> list[Path]:
    return [repository.venv] if repository.venv is not None else []


def _child_env(
    home: Path, tmp: Path, bin_dirs: Sequence[Path], repository: RepositoryConfig
) -> dict[str, str]:
    """The minimal environment, with the repository's interpreter folder first on PATH."""
    env = runner.minimal_env(home, tmp)
    if bin_dirs:
        env["PATH"] = os.pathsep.join([*(str(d) for d in bin_dirs), env["PATH"]])
    if repository.venv is not None:
        env["VIRTUAL_ENV"] = str(repository.venv)
    return env


def _results_kind(argv: Sequence[str], command: Sequence[str], repository: RepositoryConfig) -> str:
    """How this run's results are read: the repository's choice, else by the command."""
    if repository.results in ("junit", "exit-code"):
        return repository.results
    if _runs_pytest(argv):
        return "pytest"
    if _runs_unittest(argv, command):
        return "unittest"
    return "uncounted"


def _runs_unittest(argv: Sequence[str], command: Sequence[str]) -> bool:
    """``{python} -m unittest ...`` or ``python[3[.x]] -m unittest ...``, exactly so."""
    if len(argv) < 2 or not (argv[1] == "-munittest" or argv[1:3] == ["-m", "unittest"]):
        return False
    return command[0] == "{python}" or os.path.basename(argv[0]).startswith("python")


def _with_unittest_entry(argv: Sequence[str], tmp: Path, fd: int) -> list[str]:
    """The same interpreter and arguments, through our entry, copied outside the copy.

    A copy, because the sandbox may cover the folder our package lives in (when the
    checked repository holds it).
    """
    entry = tmp / "unittest_entry.py"
    shutil.copyfile(_UNITTEST_ENTRY, entry)
    rest = argv[2:] if argv[1] == "-munittest" else argv[3:]
    return [argv[0], str(entry), str(fd), *rest]


def _read_results(
    kind: str,
    work: Path,
    junit: Path,
    events: bytes,
    repository: RepositoryConfig,
    read: dict[str, Any],
) -> tuple[OutcomeCounts | None, str | None]:
    """The run's counts, or None and why they cannot be read; `read` gets what was read."""
    try:
        if kind == "pytest":
            try:
                return results.read_junit_file(junit), None
            except UnreadableResults as exc:
                raise UnreadableResults(f"the JUnit report {junit.name}: {exc}") from None
        if kind == "unittest":
            try:
                counts = results.unittest_counts(events)
            except UnreadableResults as exc:
                raise UnreadableResults(f"the unittest result: {exc}") from None
            read["expected_failures"] = counts.expected_failures
            read["unexpected_successes"] = counts.unexpected_successes
            return counts, None
        if kind == "junit":
            counts, files = results.read_junit_reports(work, repository.results_junit)
            read["files"] = files
            return counts, None
    except UnreadableResults as exc:
        return None, str(exc)
    return None, None


def _agreement(
    run: PytestRun,
    overflowed: bool,
    junit: OutcomeCounts | None,
    junit_problem: str | None,
    outcome: RunOutcome,
    read: dict[str, Any],
) -> Finding | None:
    """What our plugin reported, against the session's end, the exit status, the JUnit
    report and pytest's closing summary line; `read` gets each source's view.

    Judged only when the command exited 0 (`_judge`): a failing run fails anyway.
    """
    read["channel"] = "our pytest plugin, through a pipe"
    read["session_finished"] = run.exitstatus is not None
    read["session_exitstatus"] = run.exitstatus
    read["events"] = run.events
    read["junit"] = junit.to_dict() if junit is not None else None
    summary = read["summary"] = results.parse_pytest_summary(outcome.output_excerpt)
    read["reported"] = run.stats
    problem = "over the bound, or a writer outlived the run" if overflowed else run.problem
    if problem is not None:
        read["channel_problem"] = problem
    if run.exitstatus is None:
        return Finding(
            "tests.no_session_finish",
            "the test command exited 0 but pytest's session never finished: the process "
            "ended early (os._exit, a signal, a crash), or the plugin was silenced",
            expected="a session-finish event from our pytest plugin",
            found=f"{run.events} events, none of them the session's end",
        )
    disagree: list[tuple[str, str, str]] = []
    if problem is not None:
        disagree.append(("the plugin's channel", "only the plugin's events", str(problem)))
    if run.exitstatus != outcome.exit_code:
        disagree.append(
            (
                "the exit status",
                f"exit code {run.exitstatus}, as pytest ended its session",
                f"exit code {outcome.exit_code}",
            )
        )
    reported = run.counts.to_dict()
    if junit is not None and junit_problem is None and junit.to_dict() != reported:
        disagree.append(("the JUnit report", _counted(reported), _counted(junit.to_dict())))
    if summary is not None and summary != run.stats:
        disagree.append(("pytest's summary line", _counted(run.stats), _counted(summary)))
    if not disagree:
        return None
    what, expected, found = disagree[0]
    return Finding(
        "tests.results_disagree",
        f"{what} disagrees with what our pytest plugin reported as the tests ran"
        + (f" (and {len(disagree) - 1} more)" if len(disagree) > 1 else ""),
        expected=expected,
        found=found,
    )


def _counted(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "nothing"


def _judge(
    outcome: RunOutcome,
    timeout_s: float,
    kind: str,
    is_pytest: bool,
    counts: OutcomeCounts | None,
    report_problem: str | None,
    agreement: Finding | None = None,
) -> list[Finding]:
    if outcome.timed_out:
        return [
            Finding(
                "tests.timeout",
                f"the tests did not finish within {timeout_s:g}s and were killed",
                expected=f"finished within {timeout_s:g}s",
                found=f"killed after {outcome.duration_s:.1f}s",
            )
        ]
    if is_pytest and outcome.exit_code == NO_TESTS_EXIT_CODE:
        return [
            Finding(
                "tests.none_ran",
                "pytest collected no tests (exit code 5)",
                expected="at least one test run",
                found="exit code 5 (no tests collected)",
            )
        ]
    unittest_none = kind == "unittest" and counts is not None and counts.tests == 0
    if unittest_none and outcome.exit_code == NO_TESTS_EXIT_CODE:
        return [_none_ran("unittest ran no test (exit code 5)")]
    if outcome.exit_code != 0:
        return [
            Finding(
                "tests.failed",
                f"the test command exited with code {outcome.exit_code}",
                expected="exit code 0",
                found=f"exit code {outcome.exit_code}",
            )
        ]
    if agreement is not None:
        return [agreement]
    if kind not in _SOURCE:
        return []
    source = _SOURCE[kind]
    if counts is None or report_problem is not None:
        return [
            Finding(
                "tests.no_report",
                f"the test command exited 0 but no test can be proven to have run: "
                f"{report_problem}",
                expected="readable results (JUnit XML, or unittest's counts)",
                found=report_problem,
            )
        ]
    if counts.failures or counts.errors:
        return [
            Finding(
                "tests.failed",
                f"the test command exited 0 but {source} counts failed tests",
                expected="0 failures and 0 errors",
                found=f"{counts.failures} failures, {counts.errors} errors",
            )
        ]
    if counts.tests == 0:
        return [_none_ran(f"{source} counts no test")]
    if counts.skipped == counts.tests:
        return [
            Finding(
                "tests.all_skipped",
                f"all {counts.tests} tests were skipped",
                expected="at least one test passed",
                found=f"{counts.skipped} of {counts.tests} skipped",
            )
        ]
    return []


def _unsandboxed(outcome: RunOutcome) -> Finding:
    """Why a run under ``auto`` ended with no sandbox: the runner's notes, else none installed."""
    why = [n for n in outcome.notes if n != "the command ran without a sandbox"]
    reasons = "; ".join(why) or "neither `bwrap` nor `unshare` is installed"
    return Finding(
        "tests.unsandboxed",
        f"the tests passed, but ran with no sandbox ({reasons}): the code under test could "
        "read and write the host, so the pass proves nothing; install bubblewrap, or set "
        'network_isolation = "off" to accept unisolated runs',
        expected="a run in the bwrap or unshare sandbox",
        found="no sandbox",
    )


def _none_ran(message: str) -> Finding:
    return Finding("tests.none_ran", message, expected="at least one test run", found="0 tests")


def _details(
    outcome: RunOutcome,
    mode: str,
    snapshot: SnapshotInfo,
    counts: OutcomeCounts | None,
    read: dict[str, Any],
) -> dict[str, Any]:
    return {
        "argv": list(outcome.argv),
        "executable": outcome.executable,
        "mode": mode,
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        "duration_s": round(outcome.duration_s, 3),
        "tests_counted": counts is not None,
        "counts": counts.to_dict() if counts else None,
        "results": read,
        "output_excerpt": outcome.output_excerpt,
        "output_sha256": outcome.output_sha256,
        "output_bytes": outcome.output_bytes,
        "network_isolated": outcome.network_isolated,
        "hidden": list(outcome.hidden),
        "sandbox": outcome.sandbox,
        "sandbox_notes": list(outcome.notes),
        "limits": dict(outcome.limits),
        "limits_not_applied": list(outcome.limits_not_applied),
        "snapshot": _snapshot_details(snapshot),
    }


def _snapshot_details(snapshot: SnapshotInfo) -> dict[str, Any]:
    return {
        "files": snapshot.files,
        "bytes": snapshot.bytes,
        "symlinks": snapshot.symlinks,
        "skipped": [{"path": s.path, "reason": s.reason} for s in snapshot.skipped],
    }


def _summary_line(outcome: RunOutcome) -> str:
    if outcome.timed_out:
        return f"tests killed at the timeout after {outcome.duration_s:.1f}s"
    return f"tests finished: exit code {outcome.exit_code} in {outcome.duration_s:.1f}s"


def _error(started: float, code: str, message: str, **details: Any) -> CheckResult:
    return _timed(CheckResult.error(NAME, code, message, **details), started)


def _timed(result: CheckResult, started: float) -> CheckResult:
    return replace(result, duration_s=time.monotonic() - started)


def _tampering_scan(repo_path: Path, head: HeadState, result: CheckResult) -> CheckResult:
    """`result`, made inconclusive when the changed files reach into the test machinery.

    The changed files are read as the changes check saw them: their blobs in the
    head commit, or, in worktree mode, the working tree's files read without
    following a link, which must still hash as the changes check hashed them
    (`tests.head_moved` otherwise). See `verifier.checks.tests.tampering` and docs/security.md.
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
                    return _error(
                        started,
                        "tests.head_moved",
                        f"the working tree changed while it was verified: {path!r} differs "
                        "between the changes check and the scan for tampering",
                    )
                files[path] = bytes(kept.data)
    except InfrastructureError as exc:
        return _error(started, "tests.snapshot_failed", f"the changed files: {exc}")
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
