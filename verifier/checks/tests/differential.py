"""Differential test runs: the base is tested too, and each test is classified.

With the repository's ``baseline = "differential"``, and always when the task
has acceptance tests, the tests check runs the same command, through the same
path (copy, entry, monitor, sandbox, limits), on the base tree, with each test's
end kept by its id. The base's result is cached by what decided it, its tree
first (`verifier.checks.tests.cache`): a thousand sessions on one base pay for
one base run; sessions verified at once on the same base wait for the first
(`BASE_RUNS`). Each test is then classified (`classify`):

* ``fixed``: failed at the base, passes at the head;
* ``broken``: passed (or was skipped) at the base, fails or is skipped at the head;
* ``still_failing``, ``still_passing``: the same at both (skipped at both counts as
  still passing: it decided nothing either time);
* ``new``: only at the head; ``removed``: only at the base.

`judge` turns that into the verdict: a broken test fails it (`tests.broken`, as
does a removed one that passed); a test still failing as at the base is a note,
not a failure, only when the base is vouched for by a ``trusted_ref`` (else a
report could choose a base where everything fails) and the run is pytest through
our entry (whose per-test results come on the sealed channel); and it is
confirmed failing at the base by running it there again. The task's acceptance
tests must fail at the base (else `tests.acceptance_passes_at_base`: the task
proves nothing) and pass at the head (else `tests.acceptance_not_fixed`); its
must-keep tests must pass at the head; a test the task names that did not run is
`tests.acceptance_missing`; a base that could not be tested one test at a time is
`tests.base_run_failed`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from verifier.checks.tests.flaky import failures_only, pass_guards
from verifier.checks.tests.results import FAILED, PASSED, SKIPPED
from verifier.config import Config, RepositoryConfig
from verifier.findings import CheckResult, CheckStatus, Finding
from verifier.tasks import Task

__all__ = [
    "BASE_RUNS",
    "CLASSES",
    "BaseRuns",
    "classify",
    "judge",
    "summary",
]

CLASSES = ("fixed", "broken", "still_failing", "still_passing", "new", "removed")
#: The test ids a class lists in the details, at most (its count is always whole).
MAX_LISTED = 1000
FAIL_CODES = frozenset({"tests.broken", "tests.acceptance_not_fixed"})
# Runs the given test ids again at the base; its details hold their outcomes.
Confirm = Callable[[Sequence[str]], CheckResult]


class BaseRuns:
    """One base run at a time per base, and base results kept in memory when no store is.

    `lock(key)` holds sessions verified at once on the same base tree until the
    first has tested it (the store's cache then answers the others). Without a
    store (``--no-store``), `get`/`put` keep the last `size` base results of this
    process, under the same keys as the store's cache.
    """

    def __init__(self, size: int = 64) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._kept: OrderedDict[str, tuple[str, Mapping[str, Any]]] = OrderedDict()
        self._size = size

    @contextmanager
    def lock(self, key: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            yield

    def get(self, key: str) -> tuple[str, Mapping[str, Any]] | None:
        with self._guard:
            return self._kept.get(key)

    def put(self, key: str, session_id: str, result: Mapping[str, Any]) -> None:
        with self._guard:
            self._kept.setdefault(key, (session_id, result))
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)


#: This process's base runs (see `BaseRuns`).
BASE_RUNS = BaseRuns()


def classify(base: Mapping[str, str], head: Mapping[str, str]) -> dict[str, str]:
    """Each test id of either side, by its class (the module's list)."""
    classes: dict[str, str] = {}
    for test in sorted(base.keys() | head.keys()):
        b, h = base.get(test), head.get(test)
        if b is None:
            classes[test] = "new"
        elif h is None:
            classes[test] = "removed"
        elif h == PASSED:
            classes[test] = "fixed" if b == FAILED else "still_passing"
        elif b == FAILED:
            classes[test] = "still_failing"
        elif h == FAILED or b == PASSED:
            classes[test] = "broken"
        else:  # skipped at both
            classes[test] = "still_passing"
    return classes


def summary(classes: Mapping[str, str]) -> dict[str, Any]:
    """The details' ``classification``: a count per class, and the ids of each class but
    still_passing (at most `MAX_LISTED` each)."""
    counts = dict.fromkeys(CLASSES, 0)
    tests: dict[str, list[str]] = {c: [] for c in CLASSES if c != "still_passing"}
    for test, kind in classes.items():
        counts[kind] += 1
        if kind in tests and len(tests[kind]) < MAX_LISTED:
            tests[kind].append(test)
    return {"counts": counts, "tests": tests}


def judge(
    head: CheckResult,
    base: CheckResult | None,
    task: Task | None,
    repository: RepositoryConfig,
    config: Config,
    confirm: Confirm | None = None,
) -> CheckResult:
    """The head's result judged against the base's (None: no base was run, for a task with
    must-keep tests alone), by the rules of the module's docstring."""
    head_outcomes = head.details.get("outcomes")
    if head.status is CheckStatus.ERROR or not isinstance(head_outcomes, Mapping):
        if head.status is CheckStatus.PASS:  # a runner that reports no test by id
            return _base_failed(head, "the head's tests are not reported one by one")
        return head
    if base is None:
        return _task_at_head(head, head_outcomes, task)
    base_outcomes = base.details.get("outcomes")
    if base.status is CheckStatus.ERROR or not isinstance(base_outcomes, Mapping):
        why = "; ".join(f"{f.code}: {f.message}" for f in base.findings) or (
            "its tests are not reported one by one (pytest through our entry, or JUnit "
            "reports, are)"
        )
        return _base_failed(head, why)
    classes = classify(base_outcomes, head_outcomes)
    details: dict[str, Any] = {**head.details, "classification": summary(classes)}
    details["classification"]["base"] = {
        "status": base.status.value,
        "cached_from": base.details.get("cached_from"),
        "duration_s": base.duration_s,
    }
    fail_to_pass = task.fail_to_pass if task is not None else ()
    pass_to_pass = task.pass_to_pass if task is not None else ()
    found: list[Finding] = []
    notes: list[str] = []

    # Acceptance: fail at the base, pass at the head; must-keep tests pass at the head.
    for test in fail_to_pass:
        b, h = base_outcomes.get(test), head_outcomes.get(test)
        if h is None and b is None:
            found.append(_missing(test, "neither at the base nor at the head"))
        elif b == PASSED:
            found.append(_passes_at_base(test))
        elif h is None:
            found.append(_missing(test, "at the head"))
        elif h != PASSED:
            found.append(_not_fixed(test, h))
    for test in pass_to_pass:
        h = head_outcomes.get(test)
        if h is None:
            found.append(_missing(test, "at the head"))
        elif h != PASSED:
            found.append(
                _broken([test], "a must-keep test of the task", base_outcomes, head_outcomes)
            )

    # Regressions: what passed at the base and no longer does (or no longer runs).
    broken = [t for t, c in classes.items() if c == "broken" and t not in pass_to_pass]
    broken += [t for t, c in classes.items() if c == "removed" and base_outcomes.get(t) == PASSED]
    keep = head.findings
    status = head.status
    if failures_only(head):
        failing = [t for t in head.details["failing"] if t not in repository.known_flaky]
        attempts = head.details.get("attempts") or {}
        hard = [t for t in failing if PASSED not in attempts.get(t, ())]
        still = [t for t in hard if classes.get(t) == "still_failing" and t not in fail_to_pass]
        excusable, why = _excusable(head, base, repository)
        if still and excusable and confirm is not None:
            flaky_at_base = _confirm(still, confirm, repository.flaky_reruns)
            broken += flaky_at_base
            still = [t for t in still if t not in flaky_at_base]
        others = [t for t in hard if t not in still]
        if still and not excusable:
            notes.append(f"{len(still)} failing test(s) failed at the base too, but {why}")
        elif still:
            notes.append(
                f"still failing as at the base (not judged): {_listed(still)} "
                '(baseline = "differential", trusted_ref base)'
            )
            if not others and not [t for t in hard if t in fail_to_pass] and not broken:
                # Every failure was there before the session: the run is judged as a pass.
                flaky_found = tuple(f for f in head.findings if f.code == "tests.flaky")
                status, keep = CheckStatus.PASS, flaky_found
    if broken:
        found.insert(0, _broken(sorted(set(broken)), "", base_outcomes, head_outcomes))
    return _settled(head, status, keep, found, details, notes, config)


def _excusable(
    head: CheckResult, base: CheckResult, repository: RepositoryConfig
) -> tuple[bool, str]:
    if repository.trusted_ref is None:
        return False, (
            "a failing test is excused only on a base a trusted_ref vouches for (a report "
            "could otherwise choose a base where every test fails)"
        )
    for result in (head, base):
        read = result.details.get("results")
        if not isinstance(read, Mapping) or read.get("source") != "pytest":
            return False, "a failing test is excused only for pytest run through our entry"
    return True, ""


def _confirm(tests: Sequence[str], confirm: Confirm, reruns: int) -> list[str]:
    """Of `tests`, failed at the base once, those that pass there when run again: they are
    not failing as before, and their failure at the head is a regression."""
    passed: list[str] = []
    pending = list(tests)
    for _ in range(max(reruns, 1)):
        run = confirm(pending)
        outcomes = run.details.get("outcomes")
        if run.status not in (CheckStatus.PASS, CheckStatus.FAIL) or not isinstance(
            outcomes, Mapping
        ):
            return pending + passed  # not confirmed: none is excused
        passed += [t for t in pending if outcomes.get(t) == PASSED]
        pending = [t for t in pending if outcomes.get(t) != PASSED]
        if not pending:
            break
    return passed


def _settled(
    head: CheckResult,
    status: CheckStatus,
    keep: tuple[Finding, ...],
    found: list[Finding],
    details: dict[str, Any],
    notes: list[str],
    config: Config,
) -> CheckResult:
    findings = (*found, *keep)  # what the classification found says more than an exit code
    notes_all = (*head.notes, *notes)
    if any(f.code in FAIL_CODES for f in found) or status is CheckStatus.FAIL:
        return replace(
            head, status=CheckStatus.FAIL, findings=findings, details=details, notes=notes_all
        )
    if found or status is CheckStatus.ERROR or any(f.code == "tests.flaky" for f in keep):
        return replace(
            head, status=CheckStatus.ERROR, findings=findings, details=details, notes=notes_all
        )
    result = replace(head, details=details, notes=notes_all)
    return result if head.status is CheckStatus.PASS else pass_guards(result, config)


def _task_at_head(head: CheckResult, outcomes: Mapping[str, str], task: Task | None) -> CheckResult:
    """A task with must-keep tests alone: each must pass at the head."""
    found: list[Finding] = []
    for test in task.pass_to_pass if task is not None else ():
        h = outcomes.get(test)
        if h is None:
            found.append(_missing(test, "at the head"))
        elif h != PASSED:
            found.append(_broken([test], "a must-keep test of the task", {}, outcomes))
    if not found:
        return head
    fail = any(f.code in FAIL_CODES for f in found) or head.status is CheckStatus.FAIL
    status = CheckStatus.FAIL if fail else CheckStatus.ERROR
    return replace(head, status=status, findings=(*head.findings, *found))


def _base_failed(head: CheckResult, why: str) -> CheckResult:
    finding = Finding(
        "tests.base_run_failed",
        "the base could not be tested one test at a time, so the tests cannot be "
        f"classified: {why}",
        expected="each test's outcome at the base and at the head",
        found=why,
    )
    if head.status is CheckStatus.FAIL:  # the head's own failure decides
        return replace(head, findings=(*head.findings, finding))
    return replace(head, status=CheckStatus.ERROR, findings=(*head.findings, finding))


def _broken(
    tests: Sequence[str], what: str, base: Mapping[str, str], head: Mapping[str, str]
) -> Finding:
    first = tests[0]
    at_base = base.get(first, "absent")
    at_head = head.get(first, "absent")
    return Finding(
        "tests.broken",
        f"{len(tests)} test(s) {what + ' ' if what else ''}passed at the base and do not "
        f"at the head: {_listed(tests)}",
        path=first,
        expected=f"{PASSED} at the head ({at_base} at the base)",
        found=at_head if at_head != SKIPPED else "skipped",
    )


def _passes_at_base(test: str) -> Finding:
    return Finding(
        "tests.acceptance_passes_at_base",
        f"{test}: the task's acceptance test already passes at the base, so its passing at "
        "the head proves nothing about the session: the task is broken",
        path=test,
        expected=f"{FAILED} at the base",
        found=f"{PASSED} at the base",
    )


def _not_fixed(test: str, outcome: str) -> Finding:
    return Finding(
        "tests.acceptance_not_fixed",
        f"{test}: the task's acceptance test does not pass at the head",
        path=test,
        expected=f"{PASSED} at the head",
        found=f"{outcome} at the head",
    )


def _missing(test: str, where: str) -> Finding:
    return Finding(
        "tests.acceptance_missing",
        f"{test}: a test the task names did not run {where} (the id, in the runner's own "
        "notation, may be wrong, or the test is not collected)",
        path=test,
        expected="the test run",
        found=f"not run {where}",
    )


def _listed(tests: Sequence[str]) -> str:
    return ", ".join(tests[:5]) + (f" and {len(tests) - 5} more" if len(tests) > 5 else "")
