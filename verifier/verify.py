"""Verify one session: from a parsed report to a verdict."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from audit.findings import Finding
from verifier import __version__
from verifier._internal.cancel import CancelToken
from verifier._internal.deadline import deadline_of
from verifier.checks import registered
from verifier.checks.base import (
    Check,
    Context,
    DigestCache,
    Progress,
    TestResultCache,
    WitnessedPrefix,
)
from verifier.config import Config
from verifier.contract.report import Report
from verifier.errors import ConfigError
from verifier.findings import CheckResult, CheckStatus, Verification, cap_findings, decide
from verifier.tasks import Task

log = logging.getLogger(__name__)

#: Seconds a check is waited for after its deadline, to stop on its own, before it is left.
DEADLINE_GRACE_S = 5.0
#: The finding of a check out of time, by check (another check: its first prefix's).
DEADLINE_CODES = {
    "changes": "change.deadline_exceeded",
    "tests": "tests.deadline_exceeded",
    "audit": "audit.deadline_exceeded",
    "replay": "replay.deadline_exceeded",
}

# Called with the whole report once it has loaded, while the checks run (the
# pipeline stores it then); what it raises cancels the checks.
Admit = Callable[[Report], None]


@dataclass(frozen=True)
class Options:
    """What the command line may override for one verification."""

    repo_path: Path | None = None
    # The configured repository whose policy applies, instead of the report's repo.name.
    repo_name: str | None = None
    test_command: Sequence[str] | None = None
    test_timeout_s: float | None = None


def verify(
    report: Report,
    config: Config,
    options: Options = Options(),
    progress: Progress | None = None,
    *,
    admit: Admit | None = None,
    digest_cache: DigestCache | None = None,
    test_cache: TestResultCache | None = None,
    checks: Sequence[Check] | None = None,
    repo_problem: str | None = None,
    witnessed: WitnessedPrefix | None = None,
    task: Task | None = None,
) -> Verification:
    """Decide whether the session of `report` delivered its work.

    1. resolve the repository: its policy is the configured one of
       ``--repo-name``, else of the report's ``repo.name``; its path ``--repo``,
       else the configured path (never the report's own ``repo.path``: a report
       does not choose what it is checked against); a repository given by
       ``url`` comes as the path of its mirror (`verifier.app.pipeline`), or as
       `repo_problem`, why it could not be fetched; then the test command and
       timeout; the checks read `task`, the operator's task the command layer
       resolved (never the report's own words);
    2. start every check (`verifier.checks.registered`), each in its own thread
       as soon as the checks it reads are done, under its deadline
       (`deadline_s`): changes, then the tests on the head state it
       established; audit at once;
    3. meanwhile, once the test run has started (loading the SDK must not slow
       the way to it), load the whole report (the trajectory) and `admit` it;
       an invalid report or a refused one cancels the checks;
    4. verdict: delivered when every check passes, not delivered when one
       fails, inconclusive when one could not be carried out.
    """
    started = datetime.now(UTC)
    log.info("verifying session %s (%s)", report.session_id, report.sha256)

    context = _context(report, config, options, progress, digest_cache)
    context.test_cache, context.repo_problem = test_cache, repo_problem
    context.witnessed = witnessed  # what the witness saw of the trail, for the audit check
    context.task = task

    checks = registered() if checks is None else checks
    if not any(check.launches for check in checks):
        context.launched.set()
    with context.cancel, ThreadPoolExecutor(4, thread_name_prefix="check") as pool:
        try:
            futures = _start(pool, context, checks)

            context.launched.wait()
            trajectory = report.trajectory
            if admit is not None:
                admit(report)

            results = {name: cap_findings(f.result()) for name, f in futures.items()}
        except BaseException:
            context.cancel.set()
            context.launched.set()
            raise

    verdict = decide(list(results.values()))
    ignored = trajectory.ignored_keys
    notes = tuple(f"ignored unknown key {k}" for k in ignored[:20])
    notes += (f"and {len(ignored) - 20} more unknown keys",) if len(ignored) > 20 else ()
    return Verification(
        session_id=report.session_id,
        agent_status=report.doc.status,
        done=report.done,
        delivery_status=verdict,
        checks=results,
        started_at=started,
        finished_at=datetime.now(UTC),
        verifier_version=__version__,
        notes=notes,
    )


def _context(
    report: Report,
    config: Config,
    options: Options,
    progress: Progress | None,
    digest_cache: DigestCache | None,
) -> Context:
    repo = config.repository(options.repo_name or report.doc.repo.name)
    command = options.test_command if options.test_command is not None else repo.test_command
    timeout = options.test_timeout_s or repo.test_timeout_s or config.test_timeout_s
    if timeout <= 0:
        raise ConfigError(f"test timeout: expected a positive number of seconds, got {timeout}")
    return Context(
        report=report,
        config=config,
        repo=repo,
        repo_path=options.repo_path if options.repo_path is not None else repo.path,
        test_command=tuple(command),
        test_timeout_s=timeout,
        cancel=CancelToken(),
        progress=progress or (lambda _line: None),
        digest_cache=digest_cache,
    )


def deadline_s(check: Check, context: Context) -> float:
    """Seconds `check` may take: its ``check_deadlines`` entry, else ``check_deadline``;
    for a check that launches long work (the test run, which has its own timeout), the
    test timeout for each run it may make plus ``check_deadline``: the head's and its
    ``flaky_reruns``, and as many at the base under a differential run (the base's first
    run goes beside the head's)."""
    config = context.config
    if check.name in config.check_deadlines:
        return config.check_deadlines[check.name]
    if check.launches:
        runs = 1 + context.repo.flaky_reruns
        task = context.task
        if context.repo.baseline == "differential" or (task is not None and task.has_acceptance):
            runs += context.repo.flaky_reruns
        return context.test_timeout_s * runs + config.check_deadline_s
    return config.check_deadline_s


def _within(check: Check, context: Context, seconds: float) -> CheckResult:
    """`check.run(context)` under a deadline of `seconds` (`verifier._internal.deadline`).

    The check runs in a thread of its own: git commands it starts stop at the
    deadline, its loops poll it, and should it still run `DEADLINE_GRACE_S`
    after, it is left behind (a thread cannot be killed; a daemon one does not
    hold the process) and the result is an error naming the budget. A check
    that ends after its deadline, unless it failed, is an error too, the same
    finding leading its own: what it did past the deadline is not taken.
    """
    outcome: list[CheckResult | BaseException] = []
    done = threading.Event()

    def work() -> None:
        with deadline_of(seconds):
            try:
                outcome.append(check.run(context))
            except BaseException as exc:  # handed to the caller's thread, raised there
                outcome.append(exc)
            finally:
                done.set()

    started = time.monotonic()
    threading.Thread(target=work, name=f"check-{check.name}", daemon=True).start()
    if not done.wait(seconds + DEADLINE_GRACE_S):
        return CheckResult(check.name, CheckStatus.ERROR, (_late(check, seconds),))
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    if result.status is not CheckStatus.FAIL and time.monotonic() - started >= seconds:
        # Work past the deadline is not taken (it was cut short, or ran over); a failure
        # found on the way is proof all the same.
        late = (_late(check, seconds), *result.findings)
        result = replace(result, status=CheckStatus.ERROR, findings=late)
    return result


def _late(check: Check, seconds: float) -> Finding:
    code = DEADLINE_CODES.get(check.name, f"{next(iter(check.prefixes))}deadline_exceeded")
    key = f"check_deadlines.{check.name}" if check.launches else "check_deadline"
    return Finding(
        code,
        f"the {check.name} check did not finish within its deadline of {seconds:g}s ({key}): "
        "its work was stopped, and what it could not establish leaves the verdict open",
        expected=f"done within {seconds:g}s",
        found="stopped at the deadline",
    )


def _start(
    pool: ThreadPoolExecutor, context: Context, checks: Sequence[Check]
) -> dict[str, Future[CheckResult]]:
    """Submit every check; each waits for the results it reads, then runs, timed, under its
    deadline (`_within`)."""
    futures: dict[str, Future[CheckResult]] = {}

    def run(check: Check, reads: list[Future[CheckResult]]) -> CheckResult:
        try:
            for future in reads:
                future.result()
            context.progress(f"checking {check.name}")
            start = time.perf_counter()
            result = _within(check, context, deadline_s(check, context))
        finally:
            if check.launches:  # started its long work, or never will: the others go on
                context.launched.set()
        result = replace(result, duration_s=time.perf_counter() - start)
        context.results[check.name] = result
        return result

    for check in checks:
        unknown = [name for name in check.reads if name not in futures]
        if unknown:
            raise ConfigError(f"check {check.name!r} reads {unknown}, which do not run before it")
        futures[check.name] = pool.submit(run, check, [futures[n] for n in check.reads])
    return futures
