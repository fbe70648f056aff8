"""Check results and the verdict rules."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from audit.findings import Finding
from verifier.moments import utc_text

__all__ = [
    "MAX_FINDINGS_PER_CODE",
    "CheckResult",
    "CheckStatus",
    "DeliveryStatus",
    "Finding",
    "cap_findings",
    "decide",
]

# Findings of one code kept per check; the last one kept counts the rest.
MAX_FINDINGS_PER_CODE = 50


class CheckStatus(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"  # the check could not be carried out: infrastructure
    SKIPPED = "skipped"


class DeliveryStatus(enum.StrEnum):
    DELIVERED = "delivered"
    NOT_DELIVERED = "not_delivered"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class CheckResult:
    """What one check concluded. `details` holds check-specific figures."""

    name: str
    status: CheckStatus
    findings: tuple[Finding, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    # What a reader must know about how the check was carried out (e.g. nothing counted).
    notes: tuple[str, ...] = ()
    # Typed facts for the checks that read this one (`Context.fact`); not in the JSON form.
    facts: tuple[object, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_findings(
        cls, name: str, findings: list[Finding], details: dict[str, Any] | None = None
    ) -> CheckResult:
        """Pass when there is no finding, fail otherwise."""
        status = CheckStatus.FAIL if findings else CheckStatus.PASS
        return cls(name, status, tuple(findings), details or {})

    @classmethod
    def error(cls, name: str, code: str, message: str, **details: Any) -> CheckResult:
        """The check could not run; the finding says why."""
        return cls(name, CheckStatus.ERROR, (Finding(code, message),), details)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "findings": [f.to_dict() for f in self.findings],
            "details": self.details,
            "duration_s": round(self.duration_s, 6),
            "notes": list(self.notes),
        }


def cap_findings(result: CheckResult, per_code: int = MAX_FINDINGS_PER_CODE) -> CheckResult:
    """At most `per_code` findings of each code; the last one kept says how many more there were.

    Why: a report of 100,000 changes can break 100,000 promises, and every
    finding is rendered, stored and sent. The first ones say what is wrong;
    the count says how much. The status is left as it was.
    """
    counts: dict[str, int] = {}
    for finding in result.findings:
        counts[finding.code] = counts.get(finding.code, 0) + 1
    if all(n <= per_code for n in counts.values()):
        return result
    kept: list[Finding] = []
    seen: dict[str, int] = {}
    for finding in result.findings:
        n = seen[finding.code] = seen.get(finding.code, 0) + 1
        if n < per_code or (n == per_code and counts[finding.code] == per_code):
            kept.append(finding)
        elif n == per_code:
            more = counts[finding.code] - per_code
            kept.append(
                replace(finding, message=f"{finding.message} (and {more} more {finding.code})")
            )
    return replace(result, findings=tuple(kept))


def decide(results: list[CheckResult]) -> DeliveryStatus:
    """Delivered when every check passes; any failure wins over an error.

    A failure is proof that the work is not delivered, whatever the other checks
    could not establish; an error without a failure leaves the question open.
    A skipped check is not a pass.
    """
    statuses = {r.status for r in results}
    if CheckStatus.FAIL in statuses:
        return DeliveryStatus.NOT_DELIVERED
    if statuses == {CheckStatus.PASS}:
        return DeliveryStatus.DELIVERED
    return DeliveryStatus.INCONCLUSIVE


@dataclass(frozen=True)
class Verification:
    """One verification run of one session: the verdict beside the agent's own status."""

    session_id: str
    agent_status: str
    done: bool
    delivery_status: DeliveryStatus
    checks: dict[str, CheckResult]
    started_at: datetime
    finished_at: datetime
    verifier_version: str
    notes: tuple[str, ...] = ()

    @property
    def first_finding(self) -> Finding | None:
        for result in self.checks.values():
            if result.findings:
                return result.findings[0]
        return None

    def to_dict(self) -> dict[str, Any]:
        """The ``--format json`` object; also what the store and bundles keep."""
        return {
            "session_id": self.session_id,
            "agent_status": self.agent_status,
            "done": self.done,
            "delivery_status": self.delivery_status.value,
            "checks": {name: result.to_dict() for name, result in self.checks.items()},
            "verified_at": utc_text(self.finished_at),
            "verifier_version": self.verifier_version,
            "duration_s": round((self.finished_at - self.started_at).total_seconds(), 6),
            "notes": list(self.notes),
        }
