"""verifier.verify: every check runs under a deadline; out of time, the verdict is open.

Real sessions, real checks: a deadline too short for the work stops it (git is
killed, replay's loop leaves) and the check is an error naming the budget. A
check that ignores its deadline is left behind after the grace period, and the
verdict comes all the same.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fixed_session, to_bytes
from verifier._internal.cancel import CancelToken
from verifier.checks import registered
from verifier.checks.base import Context
from verifier.checks.tests.check import CHECK
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Verification
from verifier.tasks import Task
from verifier.verify import DEADLINE_GRACE_S, deadline_s, verify


def verified(repo: GitRepo, **config: Any) -> Verification:
    report = fixed_session(repo).report()
    repo_config = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60
    )
    return verify(
        parse_report(to_bytes(report)), Config(repositories={"calc": repo_config}, **config)
    )


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("changes", "change.deadline_exceeded"),
        ("tests", "tests.deadline_exceeded"),
        ("audit", "audit.deadline_exceeded"),
        ("replay", "replay.deadline_exceeded"),
    ],
)
def test_a_check_out_of_time_is_an_error_naming_its_deadline(
    repo: GitRepo, name: str, code: str
) -> None:
    result = verified(repo, check_deadlines={name: 0.001})
    assert result.delivery_status is DeliveryStatus.INCONCLUSIVE
    check = result.checks[name]
    assert check.status is CheckStatus.ERROR
    assert check.findings[0].code == code
    assert "deadline of 0.001s" in check.findings[0].message
    others = {
        n: r.status
        for n, r in result.checks.items()
        if n != name and r.status is not (CheckStatus.SKIPPED)
    }
    assert set(others.values()) <= {CheckStatus.PASS}, others


def test_the_same_session_within_its_deadlines_is_delivered(repo: GitRepo) -> None:
    result = verified(repo, check_deadline=60.0)
    assert result.delivery_status is DeliveryStatus.DELIVERED, result.checks


class Stuck:
    """A check that ignores its deadline: blocks until released (or 60 s)."""

    name = "audit"
    title = "Audit"
    prefixes: Mapping[str, str] = {"audit.": "the audit check"}
    reads: tuple[str, ...] = ()
    launches = False

    def __init__(self) -> None:
        self.release = threading.Event()

    def run(self, context: Context) -> CheckResult:
        self.release.wait(60)
        return CheckResult("audit", CheckStatus.PASS)


def test_a_check_that_ignores_its_deadline_is_left_behind(repo: GitRepo) -> None:
    stuck = Stuck()
    checks = [c for c in registered() if c.name != "audit"] + [stuck]
    report = fixed_session(repo).report()
    repo_config = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60
    )
    config = Config(repositories={"calc": repo_config}, check_deadlines={"audit": 0.5})
    started = time.monotonic()
    try:
        result = verify(parse_report(to_bytes(report)), config, checks=checks)
    finally:
        stuck.release.set()
    assert time.monotonic() - started < 0.5 + DEADLINE_GRACE_S + 30  # not the 60 s it blocks
    assert result.delivery_status is DeliveryStatus.INCONCLUSIVE
    assert [f.code for f in result.checks["audit"].findings] == ["audit.deadline_exceeded"]


def test_the_tests_checks_deadline_counts_every_run_it_may_make(repo: GitRepo) -> None:
    """The head's run and its reruns, and as many at the base under a differential run."""
    report = parse_report(to_bytes(fixed_session(repo).report()))

    def budget(task: Task | None = None, **keys: Any) -> float:
        repo_config = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), **keys)
        config = Config(repositories={"calc": repo_config}, check_deadline=10.0)
        context = Context(
            report, config, repo_config, repo.path, tuple(PYTEST), 60.0, CancelToken()
        )
        context.task = task
        return deadline_s(CHECK, context)

    assert budget(flaky_reruns=0) == 60 + 10
    assert budget() == 3 * 60 + 10  # flaky_reruns = 2 by default
    assert budget(baseline="differential") == 5 * 60 + 10
    assert budget(Task("t", fail_to_pass=("tests/test_calc.py::test_add",))) == 5 * 60 + 10
