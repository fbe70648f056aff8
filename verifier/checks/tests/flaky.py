"""Flaky tests told apart: a failed run's failed tests are run again, by id.

A run that failed only because tests failed (pytest through our entry: its
session finished with exit status 1, its sources agree, and every failed test
is listed) has those tests run again, up to the repository's ``flaky_reruns``
more times, each on a fresh copy with the same entry, sandbox and limits
(`verifier.checks.tests.check.check` with ``select``). A test that passes at a
later attempt is flaky: the verdict is inconclusive (`tests.flaky`, naming the
tests and their attempts), never delivered because a retry happened to pass; a
test that fails at every attempt is a failure. The tests of ``known_flaky`` are
not run again: their failure is reported, not judged. Attempts are recorded per
test (the details' ``attempts``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from verifier.checks.tests import compiled
from verifier.checks.tests.results import PASSED
from verifier.config import Config
from verifier.findings import CheckResult, CheckStatus, Finding

__all__ = ["MAX_RERUN", "failures_only", "pass_guards", "rerun"]

#: More failed tests than this are not run again: so many at once is no flake.
MAX_RERUN = 50
# Runs the tests of the given ids again on a fresh copy; its details hold their outcomes.
Rerun = Callable[[Sequence[str]], CheckResult]


def failures_only(result: CheckResult) -> bool:
    """Whether `result` failed because tests failed, and nothing else: its finding is
    ``tests.failed`` (with ``tests.flaky`` once rerun), pytest's session ended with exit
    status 1 as the run did, its JUnit report agrees with our plugin, and every failed
    test is known by its id."""
    details = result.details
    read = details.get("results")
    counts = details.get("counts")
    if result.status is not CheckStatus.FAIL or not isinstance(read, Mapping):
        return False
    codes = {f.code for f in result.findings}
    if "tests.failed" not in codes or not codes <= {"tests.failed", "tests.flaky"}:
        return False
    if not isinstance(counts, Mapping):
        return False
    if read.get("source") != "pytest" or "channel_problem" in read:
        return False
    if details.get("exit_code") != 1 or read.get("session_exitstatus") != 1:
        return False
    if read.get("junit") != dict(counts):
        return False
    failing = details.get("failing")
    failed = int(counts.get("failed", 0)) + int(counts.get("errors", 0))
    return isinstance(failing, list) and 0 < len(failing) == failed


def rerun(
    result: CheckResult, again: Rerun, reruns: int, known: Sequence[str], config: Config
) -> CheckResult:
    """`result`, with its failed tests run again (`again`) up to `reruns` more times.

    Failing at every attempt: still a failure (with `tests.flaky` beside it for those
    that passed once). Only flaky ones: inconclusive. Only `known` flaky ones: a pass
    that notes them, held to the guards of a pass (`pass_guards`).
    """
    if not failures_only(result):
        return result
    failing = list(result.details["failing"])
    known_failed = [t for t in failing if t in known]
    pending = [t for t in failing if t not in known]
    if len(pending) > MAX_RERUN:
        note = f"{len(pending)} tests failed: more than {MAX_RERUN}, so none was run again"
        return replace(result, notes=(*result.notes, note))
    attempts: dict[str, list[str]] = {t: ["failed"] for t in pending}
    notes: list[str] = []
    for number in range(1, reruns + 1):
        if not pending:
            break
        run = again(pending)
        outcomes = run.details.get("outcomes")
        if run.status not in (CheckStatus.PASS, CheckStatus.FAIL) or run.details.get("monitored"):
            codes = ", ".join(f.code for f in run.findings) or run.status.value
            notes.append(f"attempt {number + 1} could not be judged ({codes}): not counted")
            break
        if not isinstance(outcomes, Mapping):
            break
        for test in pending:
            attempts[test].append(str(outcomes.get(test, "absent")))
        pending = [t for t in pending if outcomes.get(t) != PASSED]
    flaky = [t for t, tries in attempts.items() if PASSED in tries]
    hard = [t for t, tries in attempts.items() if PASSED not in tries]
    details: dict[str, Any] = {**result.details, "attempts": attempts}
    if known_failed:
        notes.append(
            f"known flaky, reported and not judged: {_listed(known_failed)} failed (known_flaky)"
        )
    findings = [_flaky(flaky, attempts)] if flaky else []
    if hard:
        return replace(
            result,
            findings=(*result.findings, *findings),
            details=details,
            notes=(*result.notes, *notes),
        )
    if flaky:
        return replace(
            result,
            status=CheckStatus.ERROR,
            findings=tuple(findings),
            details=details,
            notes=(*result.notes, *notes),
        )
    return pass_guards(replace(result, details=details, notes=(*result.notes, *notes)), config)


def pass_guards(result: CheckResult, config: Config) -> CheckResult:
    """A failed run whose failures were excused, judged as a pass would be: native code the
    session changed, what the monitor saw, or no sandbox under ``auto`` make it
    inconclusive."""
    details = result.details
    seen = details.get("monitored") or []
    native = details.get("native_changed") or []
    if native:
        return compiled.inconclusive(replace(result, status=CheckStatus.PASS, findings=()), native)
    if seen:
        findings = tuple(
            Finding(
                str(f["code"]),
                str(f["message"]),
                **{k: str(f[k]) for k in ("path", "expected", "found") if f.get(k) is not None},
            )
            for f in seen
        )
        return replace(result, status=CheckStatus.ERROR, findings=findings)
    if details.get("sandbox") == "none" and config.network_isolation == "auto":
        finding = Finding(
            "tests.unsandboxed",
            "the tests' failures were excused, but the run had no sandbox: the code under "
            "test could read and write the host, so the pass proves nothing",
            expected="a run in the bwrap or unshare sandbox",
            found="no sandbox",
        )
        return replace(result, status=CheckStatus.ERROR, findings=(finding,))
    return replace(result, status=CheckStatus.PASS, findings=())


def _flaky(tests: Sequence[str], attempts: Mapping[str, Sequence[str]]) -> Finding:
    shown = "; ".join(f"{t} ({', '.join(attempts[t])})" for t in tests[:5])
    more = f" and {len(tests) - 5} more" if len(tests) > 5 else ""
    return Finding(
        "tests.flaky",
        f"{len(tests)} test(s) failed, then passed when run again on a fresh copy: "
        f"{shown}{more}; a retry that happens to pass proves nothing either way",
        path=tests[0],
        expected="the same outcome at every attempt",
        found=", ".join(attempts[tests[0]]),
    )


def _listed(tests: Sequence[str]) -> str:
    return ", ".join(tests[:5]) + (f" and {len(tests) - 5} more" if len(tests) > 5 else "")
