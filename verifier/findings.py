"""Check results and the verdict rules."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from audit.findings import Finding
from verifier.moments import utc_text

__all__ = [
    "DECIDING_RANK",
    "MAX_FINDINGS_PER_CODE",
    "OTHER_RANK",
    "CheckResult",
    "CheckStatus",
    "DeliveryStatus",
    "Finding",
    "cap_findings",
    "decide",
    "deciding_finding",
    "deciding_order",
    "deciding_rank",
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


# Which check's findings decided a verdict: a failure's before an error's (as `decide`
# rules), then any other's. The store's SQL ranks check statuses with this same table.
DECIDING_RANK = {CheckStatus.FAIL.value: 0, CheckStatus.ERROR.value: 1}
OTHER_RANK = 2

T = TypeVar("T")


def deciding_rank(status: str) -> int:
    """0 for a check that failed, 1 for one in error, 2 for any other."""
    return DECIDING_RANK.get(str(status), OTHER_RANK)


def deciding_order(checks: Iterable[tuple[str, Sequence[T]]]) -> list[T]:
    """The findings of (status, findings) pairs given in check order, those that decide
    first: every failed check's, then every erring check's, then the rest (stable)."""
    ranked = sorted(enumerate(checks), key=lambda item: (deciding_rank(item[1][0]), item[0]))
    return [finding for _, (_, findings) in ranked for finding in findings]


def deciding_finding(checks: Iterable[tuple[str, Sequence[T]]]) -> T | None:
    """The finding that decided the verdict: the first finding of the first check that
    failed, else of the first check in error, else the first finding of any check.

    "First finding" everywhere (``list``, the dashboard, the gate, notifications) is
    this one: an infrastructure error of one check never stands in for the failure of
    another that made the session not delivered.
    """
    best: T | None = None
    best_rank = OTHER_RANK + 1
    for status, findings in checks:
        rank = deciding_rank(status)
        if findings and rank < best_rank:
            best, best_rank = findings[0], rank
    return best


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
        """The finding that decided the verdict (`deciding_finding`)."""
        return deciding_finding((r.status.value, r.findings) for r in self.checks.values())

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


# The note of a run whose report had no audit trail when its check result predates the
# audit check's own text for it.
NO_TRAIL_NOTE = (
    "no audit trail (audit.trail = 'none'), accepted by the repository's trail = 'optional': "
    "the calls and their effects are the report's word"
)


def trail_note(checks: object) -> str | None:
    """What a verdict rests on when the report had no audit trail and its repository
    accepted that (``trail = "optional"``): the audit check's note, from a run's
    ``checks`` (as stored, or as the API answers them), which every face shows beside the
    verdict. None for a recorded trail, or when the missing trail left the verdict
    inconclusive (``audit.no_trail``, a finding)."""
    audit = checks.get("audit") if isinstance(checks, Mapping) else None
    if not isinstance(audit, Mapping) or audit.get("status") != "pass":
        return None
    details = audit.get("details")
    if not isinstance(details, Mapping) or details.get("trail") != "none":
        return None
    # The audit check writes its no-trail note first, before a signature's or a witness's.
    notes = audit.get("notes")
    return str(notes[0]) if isinstance(notes, list) and notes else NO_TRAIL_NOTE
