"""Minimal valid session reports (contract v1), and finished verifications of them, for
the tests of the store and of what reads it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from verifier.findings import CheckResult, CheckStatus, Finding, Verification, decide

BASE_COMMIT = "6f1c" * 10
T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)


def report_dict(session_id: str = "s1", status: str = "done", **overrides: Any) -> dict[str, Any]:
    """The smallest report the contract accepts; `overrides` replace top-level fields."""
    report: dict[str, Any] = {
        "schema_version": "1",
        "session_id": session_id,
        "agent": {"name": "repo-fixer", "version": "0.3.0", "tool_profile": "default"},
        "repo": {"name": "calc", "base_commit": BASE_COMMIT, "head_commit": None},
        "started_at": "2026-11-29T10:00:00Z",
        "ended_at": "2026-11-29T10:02:10Z",
        "status": status,
        "changes": [],
        "trajectory": {
            "format": "gemini-contents",
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        },
        "audit": {"entries": [], "count": 0, "head": None},
    }
    report.update(overrides)
    return report


def make_report_bytes(session_id: str = "s1", status: str = "done", **overrides: Any) -> bytes:
    return json.dumps(report_dict(session_id, status, **overrides)).encode()


def finished(
    session_id: str,
    checks: Mapping[str, CheckResult],
    started_at: datetime,
    *,
    seconds: float = 2.0,
) -> Verification:
    """A verification of a done session that ran `checks`, decided as `verify` decides."""
    return Verification(
        session_id=session_id,
        agent_status="done",
        done=True,
        delivery_status=decide(list(checks.values())),
        checks=dict(checks),
        started_at=started_at,
        finished_at=started_at + timedelta(seconds=seconds),
        verifier_version="0.1.0",
    )


def verification_of(
    session_id: str = "s1",
    changes: tuple[Finding, ...] = (),
    tests: CheckResult | None = None,
    started_at: datetime = T0,
) -> Verification:
    """A finished verification: `changes` fail the changes check, `tests` replaces a pass."""
    checks = {
        "changes": CheckResult(
            "changes", CheckStatus.FAIL if changes else CheckStatus.PASS, changes
        ),
        "tests": tests or CheckResult("tests", CheckStatus.PASS, details={"passed": 6}),
        "audit": CheckResult("audit", CheckStatus.PASS),
    }
    return finished(session_id, checks, started_at, seconds=2.5)
