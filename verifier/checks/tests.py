"""The tests check: the repository's own tests pass on an isolated copy of the head state.

`check()` takes these steps, in order:

1. Refuse an empty command (`tests.no_command`); expand an argument that is
   exactly ``{python}`` to the verifier's own interpreter.
2. Decide the sandbox from `Config.network_isolation`: ``auto`` uses it when
   it works here, ``required`` fails the check as an error when it does not
   (`tests.isolation_unavailable`), ``off`` never uses it.
3. Make a temporary directory holding ``work/`` (the copy), ``home/``, ``tmp/``
   and the JUnit file, which lies outside ``work/``; it is removed afterwards.
4. Copy the head state into ``work/`` (`verifier.snapshot.materialize`):
   the commit's blobs, or the working tree when there is no head commit
   (`tests.snapshot_failed` when that cannot be done). In worktree mode the
   copy must hold, file for file, the bytes the changes check hashed
   (`tests.head_moved` otherwise: the tree changed while it was verified).
5. When the command runs pytest, add ``--junitxml=<tmp>/junit.xml`` and
   ``-p no:cacheprovider``.
6. Run the command in ``work/`` with a minimal environment and a timeout
   (`verifier.runner.run`); a missing program is `tests.runner_not_found`.
7. Judge: a timeout, a non-zero exit, no test run, every test skipped, or no
   JUnit report from pytest is a failure. The exit code decides before any
   text the run printed. For a runner other than pytest we cannot count
   tests: exit 0 is an error (`tests.uncounted`), never a pass.

Nothing is ever run in the user's repository, and the repository is not
modified (see `verifier.snapshot`). The codes are listed in docs/findings.md.
"""

from __future__ import annotations

import itertools
import os
import stat
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verifier import runner
from verifier.cancel import CancelToken
from verifier.checks import Context, HeadState
from verifier.config import Config
from verifier.errors import InfrastructureError
from verifier.findings import CheckResult, CheckStatus, Finding
from verifier.runner import RunnerNotFound, RunOutcome
from verifier.snapshot import SnapshotError, SnapshotInfo, materialize

__all__ = ["NAME", "check"]

NAME = "tests"
PYTEST_NO_TESTS_COLLECTED = 5
# Our own temp file, but written by a process running code under test.
MAX_JUNIT_BYTES = 64 << 20


@dataclass(frozen=True)
class Counts:
    """Test counts summed over the JUnit report's test suites."""

    tests: int
    failures: int
    errors: int
    skipped: int

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped

    def to_dict(self) -> dict[str, int]:
        return {
            "passed": self.passed,
            "failed": self.failures,
            "errors": self.errors,
            "skipped": self.skipped,
        }


class TestsCheck:
    """Step 2 of the verdict: the configured tests on a copy of the head state."""

    name = NAME
    reads: tuple[str, ...] = ("changes",)

    def run(self, context: Context) -> CheckResult:
        head = context.fact(HeadState)
        if context.repo_path is None or head is None:
            return CheckResult(
                NAME, CheckStatus.SKIPPED, details={"reason": "no head state to test"}
            )
        return check(
            context.repo_path,
            head.head_commit,
            context.test_command,
            context.test_timeout_s,
            context.config,
            progress=context.progress,
            # In worktree mode the copy must hold the bytes the changes check hashed.
            expected_files=head.files if head.mode == "worktree" else None,
            cancel=context.cancel,
        )


CHECK = TestsCheck()


def check(
    repo_path: Path,
    head_commit: str | None,
    command: Sequence[str],
    timeout_s: float,
    config: Config,
    progress: Callable[[str], None] | None = None,
    expected_files: Mapping[str, str] | None = None,
    cancel: CancelToken | None = None,
) -> CheckResult:
    """Run the configured test command on a copy of the head state and judge the outcome.

    `expected_files` (path -> SHA-256), when given, is what the copy must hold;
    `cancel` stops the run (its process group killed, `Cancelled` raised).
    """
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
    argv = [sys.executable if arg == "{python}" else arg for arg in command]

    isolate = _decide_isolation(config.network_isolation)
    if isolate is None:
        return _error(
            started,
            "tests.isolation_unavailable",
            "network_isolation is 'required' but the `unshare` sandbox does not work here",
        )

    with tempfile.TemporaryDirectory(prefix="verifier-tests-", ignore_cleanup_errors=True) as td:
        tmp = Path(td)
        work, home, child_tmp = tmp / "work", tmp / "home", tmp / "tmp"
        home.mkdir()
        child_tmp.mkdir()
        junit = tmp / "junit.xml"

        try:
            snapshot = materialize(
                repo_path, head_commit, work, max_bytes=config.max_snapshot_bytes
            )
        except SnapshotError as exc:
            return _error(started, "tests.snapshot_failed", str(exc), mode=mode)
        if expected_files is not None:
            moved = _moved(expected_files, snapshot.digests)
            if moved:
                return _error(
                    started,
                    "tests.head_moved",
                    f"the working tree changed while it was verified: {moved[0]!r}"
                    + (f" and {len(moved) - 1} more" if len(moved) > 1 else "")
                    + " differ between the changes check and the copy for the tests",
                    mode=mode,
                )

        is_pytest = _runs_pytest(argv)
        if is_pytest:
            argv = _with_pytest_options(argv, junit)

        say(f"running tests: {argv} (timeout {timeout_s:g}s)")
        try:
            outcome = runner.run(
                argv,
                cwd=work,
                timeout_s=timeout_s,
                env=runner.minimal_env(home, child_tmp),
                isolate_network=isolate,
                excerpt_bytes=config.output_excerpt_bytes,
                hide=_hidden_paths(repo_path, config, keep=[tmp, Path(argv[0])]),
                writable=[tmp],
                cancel=cancel,
            )
        except RunnerNotFound as exc:
            return _error(started, "tests.runner_not_found", str(exc), argv=argv, mode=mode)
        except InfrastructureError as exc:
            return _error(started, "tests.runner_failed", str(exc), argv=argv, mode=mode)
        say(_summary_line(outcome))

        counts, report_problem = _read_junit(junit) if is_pytest else (None, None)
    findings = _judge(outcome, timeout_s, is_pytest, counts, report_problem)
    details = _details(outcome, mode, snapshot, is_pytest, counts)
    if not findings and not is_pytest:
        # Exit 0 from a runner we cannot count proves nothing ran ("Ran 0 tests"
        # exits 0 too): the question stays open rather than passing.
        uncounted = Finding(
            "tests.uncounted",
            f"{os.path.basename(argv[0])!r} exited 0, but only pytest runs can be counted: "
            "configure a pytest command to prove that at least one test ran",
            expected="a counted test run",
            found="exit code 0, tests not counted",
        )
        return _timed(CheckResult(NAME, CheckStatus.ERROR, (uncounted,), details), started)
    result = CheckResult.from_findings(NAME, findings, details)
    return _timed(result, started)


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


def _hidden_paths(repo_path: Path, config: Config, keep: Sequence[Path]) -> list[Path]:
    """What the sandbox covers: the checked repository, our configuration and database,
    and the user's credential files; never a path that holds what the run needs."""
    candidates = [repo_path.resolve(), Path.home() / ".local" / "share" / "verifier"]
    if config.source is not None:
        candidates.append(config.source.resolve())
    scheme, _, rest = config.database_url.partition(":///")
    if scheme.split("+")[0] == "sqlite" and rest and not rest.startswith(":memory:"):
        database = Path(rest.split("?")[0]).resolve()  # relative: to our working folder
        candidates += [database, Path(f"{database}-wal"), Path(f"{database}-shm")]
    candidates += [Path.home() / name for name in CREDENTIALS]
    needed = [
        p.resolve() for p in (*keep, Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix))
    ]
    return [c for c in candidates if not any(n == c or n.is_relative_to(c) for n in needed)]


def _decide_isolation(setting: str) -> bool | None:
    """True or False for the run; None when isolation is required and unavailable."""
    if setting == "off":
        return False
    available = runner.network_isolation_available()
    if setting == "required" and not available:
        return None
    return available


def _moved(expected: Mapping[str, str], copied: Mapping[str, str]) -> list[str]:
    """Paths whose bytes differ between two reads of the working tree, sorted."""
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


def _read_junit(path: Path) -> tuple[Counts | None, str | None]:
    """The counts of a JUnit XML report, or None and why it could not be read.

    The code under test can reach this file, so it is opened without following a
    link and without blocking (a FIFO must not hang us), must be a regular file,
    and is read up to a bound.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, f"pytest wrote no JUnit report at {path.name}"
    except OSError as exc:
        return None, f"cannot read the JUnit report: {exc}"
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "the JUnit report is not a regular file"
        data = fh.read(MAX_JUNIT_BYTES + 1)
    if len(data) > MAX_JUNIT_BYTES:
        return None, f"the JUnit report is over the {MAX_JUNIT_BYTES} byte limit"
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        return None, f"cannot parse the JUnit report: {exc}"
    totals = [0, 0, 0, 0]
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for suite in suites:
        for i, key in enumerate(("tests", "failures", "errors", "skipped")):
            try:
                totals[i] += int(suite.get(key, "0"))
            except ValueError:
                return None, f"the JUnit report has {key}={suite.get(key)!r}, not a number"
    return Counts(*totals), None


def _judge(
    outcome: RunOutcome,
    timeout_s: float,
    is_pytest: bool,
    counts: Counts | None,
    report_problem: str | None,
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
    if is_pytest and outcome.exit_code == PYTEST_NO_TESTS_COLLECTED:
        return [
            Finding(
                "tests.none_ran",
                "pytest collected no tests (exit code 5)",
                expected="at least one test run",
                found="exit code 5 (no tests collected)",
            )
        ]
    if outcome.exit_code != 0:
        return [
            Finding(
                "tests.failed",
                f"the test command exited with code {outcome.exit_code}",
                expected="exit code 0",
                found=f"exit code {outcome.exit_code}",
            )
        ]
    if not is_pytest:
        return []
    if counts is None:
        return [
            Finding(
                "tests.no_report",
                f"pytest exited 0 but no test can be proven to have run: {report_problem}",
                expected="a readable JUnit XML report",
                found=report_problem,
            )
        ]
    if counts.failures or counts.errors:
        return [
            Finding(
                "tests.failed",
                "pytest exited 0 but its JUnit report counts failed tests",
                expected="0 failures and 0 errors",
                found=f"{counts.failures} failures, {counts.errors} errors",
            )
        ]
    if counts.tests == 0:
        return [
            Finding(
                "tests.none_ran",
                "the JUnit report counts no test",
                expected="at least one test run",
                found="0 tests",
            )
        ]
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


def _details(
    outcome: RunOutcome,
    mode: str,
    snapshot: SnapshotInfo,
    is_pytest: bool,
    counts: Counts | None,
) -> dict[str, Any]:
    return {
        "argv": list(outcome.argv),
        "executable": outcome.executable,
        "mode": mode,
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        "duration_s": round(outcome.duration_s, 3),
        "tests_counted": is_pytest and counts is not None,
        "counts": counts.to_dict() if counts else None,
        "output_excerpt": outcome.output_excerpt,
        "output_sha256": outcome.output_sha256,
        "output_bytes": outcome.output_bytes,
        "network_isolated": outcome.network_isolated,
        "hidden": list(outcome.hidden),
        "snapshot": {
            "files": snapshot.files,
            "bytes": snapshot.bytes,
            "symlinks": snapshot.symlinks,
            "skipped": [{"path": s.path, "reason": s.reason} for s in snapshot.skipped],
        },
    }


def _summary_line(outcome: RunOutcome) -> str:
    if outcome.timed_out:
        return f"tests killed at the timeout after {outcome.duration_s:.1f}s"
    return f"tests finished: exit code {outcome.exit_code} in {outcome.duration_s:.1f}s"


def _error(started: float, code: str, message: str, **details: Any) -> CheckResult:
    return _timed(CheckResult.error(NAME, code, message, **details), started)


def _timed(result: CheckResult, started: float) -> CheckResult:
    return replace(result, duration_s=time.monotonic() - started)
