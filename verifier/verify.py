"""Verify one session: from a parsed report to a verdict."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from verifier import __version__
from verifier.checks import audit as audit_check
from verifier.checks import changes as changes_check
from verifier.checks import tests as tests_check
from verifier.config import Config, RepositoryConfig
from verifier.contract import Report
from verifier.errors import ConfigError
from verifier.findings import CheckResult, CheckStatus, Verification, decide
from verifier.profiles import Profile, load_profile

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Options:
    """What the command line may override for one verification."""

    repo_path: Path | None = None
    test_command: Sequence[str] | None = None
    test_timeout_s: float | None = None


def verify(
    report: Report, config: Config, options: Options = Options(), progress: Progress | None = None
) -> Verification:
    """Decide whether the session of `report` delivered its work.

    1. resolve the repository: ``--repo``, else the configured path of
       ``repo.name`` (never the report's own ``repo.path``: a report does not
       choose what it is checked against);
    2. changes: the claims against the repository;
    3. tests: the configured test command on an isolated copy of the head state;
    4. audit: the hash chain, its completeness, and the effects against the claims;
    5. verdict: delivered when all three pass, not delivered when one fails,
       inconclusive when one could not run.
    """
    started = datetime.now(UTC)
    say = progress or (lambda _line: None)
    repo_config = config.repository(report.doc.repo.name)
    profile, profile_note = _profile(report, config)
    log.info("verifying session %s (%s)", report.session_id, report.sha256)

    repo_path = _resolve_repo(repo_config, options)
    say(f"repository: {repo_path if repo_path else 'not found'}")

    say("checking changes")
    changes = _timed(lambda: _changes(report, repo_path, repo_config))

    tests = _timed(lambda: _tests(report, repo_path, repo_config, config, options, changes, say))

    say("checking audit trail")
    audit = _timed(lambda: audit_check.check(report, profile))

    checks = {"changes": changes, "tests": tests, "audit": audit}
    verdict = decide(list(checks.values()))
    ignored = report.trajectory.ignored_keys
    notes = tuple(f"ignored unknown key {k}" for k in ignored[:20])
    notes += (f"and {len(ignored) - 20} more unknown keys",) if len(ignored) > 20 else ()
    notes += (profile_note,) if profile_note else ()
    return Verification(
        session_id=report.session_id,
        agent_status=report.doc.status,
        done=report.done,
        delivery_status=verdict,
        checks=checks,
        started_at=started,
        finished_at=datetime.now(UTC),
        verifier_version=__version__,
        notes=notes,
    )


def _profile(report: Report, config: Config) -> tuple[Profile, str | None]:
    """The report's tool profile; one we do not have leaves every call unknown, with a note."""
    name = report.doc.agent.tool_profile
    try:
        return load_profile(config.profiles_dir, name), None
    except ConfigError as exc:
        return Profile(name or "default"), f"{exc}: every call is reported as unknown"


def _resolve_repo(repo_config: RepositoryConfig, options: Options) -> Path | None:
    if options.repo_path is not None:
        return options.repo_path
    return repo_config.path


def _changes(report: Report, repo_path: Path | None, repo_config: RepositoryConfig) -> CheckResult:
    if repo_path is None:
        return CheckResult.error(
            changes_check.NAME,
            "change.repo_unavailable",
            f"no repository for {report.doc.repo.name!r}: pass --repo or set "
            f"repositories.{report.doc.repo.name}.path in the configuration",
        )
    doc = report.doc
    return changes_check.check(
        repo_path, doc.repo.base_commit, doc.repo.head_commit, doc.changes, repo_config
    )


def _tests(
    report: Report,
    repo_path: Path | None,
    repo_config: RepositoryConfig,
    config: Config,
    options: Options,
    changes: CheckResult,
    say: Progress,
) -> CheckResult:
    """Run the tests, unless there is no head state to run them on."""
    if (
        repo_path is None
        or changes.status is CheckStatus.ERROR
        or any(f.code == "change.head_missing" for f in changes.findings)
    ):
        return CheckResult(
            tests_check.NAME, CheckStatus.SKIPPED, details={"reason": "no head state to test"}
        )
    command = options.test_command if options.test_command is not None else repo_config.test_command
    timeout = options.test_timeout_s or repo_config.test_timeout_s or config.test_timeout_s
    if timeout <= 0:
        raise ConfigError(f"test timeout: expected a positive number of seconds, got {timeout}")
    head = changes.details.get("head_commit") if report.doc.repo.head_commit else None
    # In worktree mode the copy the tests run on must hold the bytes the changes check hashed.
    expected = changes.observed if head is None else None
    return tests_check.check(
        repo_path,
        head,
        tuple(command),
        timeout,
        config,
        progress=say,
        expected_files=expected,
        repository=repo_config,
    )


def _timed(run: Callable[[], CheckResult]) -> CheckResult:
    start = time.perf_counter()
    result = run()
    return replace(result, duration_s=time.perf_counter() - start)
