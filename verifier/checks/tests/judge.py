"""From a finished test run to the tests check's result: read its results, reconcile what
pytest's sources say, judge, and say in the details what the verdict rests on.

A timeout, a non-zero exit, no test run, every test skipped, failures in the
results, or no readable results is a failure. The exit code decides before any
text the run printed. For pytest, a session that never finished (``os._exit``,
a signal, a crash) is `tests.no_session_finish`, and the exit status, the
plugin's per-test outcomes, the JUnit report and pytest's closing summary line
must agree (`tests.results_disagree`). A run whose tests are not counted is an
error (`tests.uncounted`), never a pass, unless the repository opted in to
``results = "exit-code"``. A run that passed with no sandbox under
``network_isolation = "auto"`` is an error (`tests.unsandboxed`); under
``"off"``, the operator's choice, it passes with a note.

The results are read by `verifier.checks.tests.results`; the codes are listed
in docs/findings.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verifier._internal.sandbox.runner import RunOutcome
from verifier._internal.snapshot import SnapshotInfo
from verifier.checks.tests import NAME, monitoring, results
from verifier.checks.tests.results import MonitorEvent, OutcomeCounts, PytestRun, UnreadableResults
from verifier.config import Config, RepositoryConfig
from verifier.findings import CheckResult, CheckStatus, Finding

__all__ = [
    "GUARANTEE",
    "NO_TESTS_EXIT_CODE",
    "SOURCE",
    "Reading",
    "details",
    "error",
    "judge",
    "read_results",
    "snapshot_details",
    "timed",
    "verdict",
]

# pytest's "no tests collected"; unittest's "no tests ran" since Python 3.12.
NO_TESTS_EXIT_CODE = 5
# The failing tests a result lists by id, at most (the counts say how many there were).
MAX_FAILING_LISTED = 1000
# Where each kind of run's counts come from, as findings name it.
SOURCE = {
    "pytest": "our pytest plugin",
    "unittest": "unittest's result",
    "junit": "the JUnit reports",
}
# How far each kind of run's results can be trusted, as the verdict's details say.
GUARANTEE = {
    "pytest": "reported by our plugin as each test finished, on a pipe only the verifier "
    "reads; checked against the exit status, the JUnit report and the summary line",
    "unittest": "reported by our entry when the run stopped, on a pipe only the verifier reads",
    "junit": "files the command wrote",
    "exit-code": "the exit code alone",
}


@dataclass(frozen=True)
class Reading:
    """What a finished run's results say.

    `kind` is how they were read (``pytest``, ``unittest``, ``junit``,
    ``exit-code``, ``uncounted``); `read` what was read and from where (the
    details' ``results``); `counts` the tests counted, None when none could be
    (`problem` then says why, when it was tried); `agreement` the finding when
    pytest's sources disagree or its session never finished.
    """

    kind: str
    read: dict[str, Any]
    counts: OutcomeCounts | None = None
    problem: str | None = None
    agreement: Finding | None = None
    monitor: tuple[MonitorEvent, ...] = ()
    # Each test's end by its id (pytest's node ids, JUnit's classname.name); empty for a
    # run whose tests are not known one by one (unittest's counts, the exit code).
    outcomes: Mapping[str, str] = field(default_factory=dict)


def read_results(
    kind: str,
    read: dict[str, Any],
    outcome: RunOutcome,
    work: Path,
    junit: Path,
    events: bytes,
    overflowed: bool,
    repository: RepositoryConfig,
) -> Reading:
    """The results of a finished run, as `kind` says they are read; `read` gets what was read.

    `events` is what came through the pipe of our entry, `overflowed` whether
    bytes were dropped from it; `junit` is where our pytest options had the
    JUnit report written, `work` the copy that ran.
    """
    outcomes: dict[str, str] = {}
    counts, problem = _counts(kind, work, junit, events, repository, read, outcomes)
    agreement = None
    monitor: tuple[MonitorEvent, ...] = ()
    if kind == "pytest":
        run = results.read_pytest_events(events)
        agreement = _agreement(run, overflowed, counts, problem, outcome, read)
        counts, monitor, outcomes = run.counts, run.monitor, dict(run.outcomes)
    elif kind == "unittest":
        monitor = results.read_monitor(events)
    if kind in ("pytest", "unittest"):
        read["monitor_events"] = len(monitor)
    return Reading(kind, read, counts, problem, agreement, monitor, outcomes)


def _counts(
    kind: str,
    work: Path,
    junit: Path,
    events: bytes,
    repository: RepositoryConfig,
    read: dict[str, Any],
    outcomes: dict[str, str],
) -> tuple[OutcomeCounts | None, str | None]:
    """The run's counts, or None and why they cannot be read; `read` gets what was read,
    `outcomes` each JUnit case's end."""
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
            counts, files = results.read_junit_reports(work, repository.results_junit, outcomes)
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

    Judged only when the command exited 0 (`judge`): a failing run fails anyway.
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


def judge(
    outcome: RunOutcome, reading: Reading, timeout_s: float, is_pytest: bool
) -> list[Finding]:
    """The broken promises of a finished run, the first that decides only; none for a pass.

    `is_pytest` says the command runs pytest, whose exit code 5 is "no tests
    collected" however its results are read.
    """
    kind, counts, report_problem = reading.kind, reading.counts, reading.problem
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
    if reading.agreement is not None:
        return [reading.agreement]
    if kind not in SOURCE:
        return []
    source = SOURCE[kind]
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


def verdict(
    outcome: RunOutcome,
    reading: Reading,
    *,
    timeout_s: float,
    is_pytest: bool,
    mode: str,
    snapshot: SnapshotInfo,
    config: Config,
    repository: RepositoryConfig,
) -> CheckResult:
    """The check's result for a finished run: a pass or a failure (`judge`), or an error
    when a pass would prove nothing (no sandbox under ``auto``, no test counted), with
    the `details`; the notes say how the run was judged and isolated."""
    findings = judge(outcome, reading, timeout_s, is_pytest)
    facts = details(outcome, mode, snapshot, reading)
    seen = monitoring.findings(reading.monitor, repository.changed_data)
    if seen and not findings:
        # A pass the monitor saw reached into the runner, or read data the session changed:
        # for a person to judge.
        return CheckResult(NAME, CheckStatus.ERROR, tuple(seen), facts)
    if findings and outcome.exit_code == 0:
        # A run that exited 0 and still fails (its sources disagree, its session never
        # finished): what the monitor saw says how.
        findings = [*findings, *(f for f in seen if f.code == "tests.tampering_suspected")]
    elif findings and seen:
        # A failed run: the failure decides, but should its failures be excused (still
        # failing as at the base, known flaky) what the monitor saw decides instead.
        facts["monitored"] = [f.to_dict() for f in seen]
    if not findings and outcome.sandbox == "none" and config.network_isolation == "auto":
        # A pass proved nothing about code that could read and write the whole host;
        # a failure stays a failure.
        return CheckResult(NAME, CheckStatus.ERROR, (_unsandboxed(outcome),), facts)
    if outcome.sandbox == "none" and config.network_isolation == "off":
        isolation: tuple[str, ...] = ('network_isolation = "off": nothing was isolated',)
    else:
        isolation = ()
    if not findings and reading.kind == "uncounted":
        # Exit 0 from a runner we cannot count proves nothing ran ("Ran 0 tests"
        # exits 0 too): the question stays open rather than passing.
        uncounted = _uncounted(outcome, repository)
        return CheckResult(NAME, CheckStatus.ERROR, (uncounted,), facts, notes=isolation)
    result = CheckResult.from_findings(NAME, findings, facts)
    if reading.kind == "exit-code":
        note = 'tests not counted: results = "exit-code" judges the run by its exit code alone'
        result = replace(result, notes=(note,))
    return replace(result, notes=(*result.notes, *isolation))


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


def _uncounted(outcome: RunOutcome, repository: RepositoryConfig) -> Finding:
    """A run that exited 0 with no test counted, and how to have its tests counted."""
    where = f"[repositories.{repository.name or '<name>'}]"
    return Finding(
        "tests.uncounted",
        f"{os.path.basename(outcome.argv[0])!r} exited 0, but its tests were not counted: in "
        f'{where} set results = {{ junit = ["reports/*.xml"] }} for a runner that '
        'writes JUnit XML, or results = "exit-code" to accept the exit code alone '
        "(docs/runners.md)",
        expected="a counted test run",
        found="exit code 0, tests not counted",
    )


def _none_ran(message: str) -> Finding:
    return Finding("tests.none_ran", message, expected="at least one test run", found="0 tests")


def details(
    outcome: RunOutcome, mode: str, snapshot: SnapshotInfo, reading: Reading
) -> dict[str, Any]:
    """What the verdict of a finished run rests on (docs/findings.md, Details)."""
    counts = reading.counts
    return {
        "argv": list(outcome.argv),
        "executable": outcome.executable,
        "mode": mode,
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        "duration_s": round(outcome.duration_s, 3),
        "tests_counted": counts is not None,
        "counts": counts.to_dict() if counts else None,
        "results": reading.read,
        # The tests that failed, by id, when the run reports them one by one.
        "failing": sorted(t for t, o in reading.outcomes.items() if o == results.FAILED)[
            :MAX_FAILING_LISTED
        ],
        "output_excerpt": outcome.output_excerpt,
        "output_sha256": outcome.output_sha256,
        "output_bytes": outcome.output_bytes,
        "network_isolated": outcome.network_isolated,
        "hidden": list(outcome.hidden),
        "sandbox": outcome.sandbox,
        "sandbox_notes": list(outcome.notes),
        "limits": dict(outcome.limits),
        "limits_not_applied": list(outcome.limits_not_applied),
        "snapshot": snapshot_details(snapshot),
    }


def snapshot_details(snapshot: SnapshotInfo) -> dict[str, Any]:
    """The copy the tests ran on: its files, bytes and links, and what was left out of it."""
    return {
        "files": snapshot.files,
        "bytes": snapshot.bytes,
        "symlinks": snapshot.symlinks,
        "skipped": [{"path": s.path, "reason": s.reason} for s in snapshot.skipped],
    }


def error(started: float, code: str, message: str, **details: Any) -> CheckResult:
    """The check could not be carried out (`code`), timed from `started` (`time.monotonic`)."""
    return timed(CheckResult.error(NAME, code, message, **details), started)


def timed(result: CheckResult, started: float) -> CheckResult:
    """`result`, with the time since `started` (`time.monotonic`) as its duration."""
    return replace(result, duration_s=time.monotonic() - started)
