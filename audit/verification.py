"""`verify_trail`: a session report's `audit` object checked in order (see `audit`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit._collect import json_type
from audit.chain import verify_chain
from audit.completeness import Call, Change, check_completeness
from audit.findings import Finding

__all__ = ["verify_trail"]


def verify_trail(
    audit: Mapping[str, Any],
    *,
    session_id: str,
    calls: Sequence[Call],
    claims: Sequence[Change],
) -> list[Finding]:
    """All findings on a report's `audit` object; an empty list means the trail holds."""
    if not isinstance(audit, Mapping):
        return [
            Finding(
                "audit.trail_malformed",
                "the audit trail is not an object",
                "audit",
                expected="object",
                found=json_type(audit),
            )
        ]
    entries = audit.get("entries")
    if not isinstance(entries, list):
        return [
            Finding(
                "audit.trail_malformed",
                "audit.entries is missing or not a list",
                "audit.entries",
                expected="array",
                found="missing" if "entries" not in audit else json_type(entries),
            )
        ]
    findings = verify_chain(
        entries, session_id=session_id, count=audit.get("count"), head=audit.get("head")
    )
    findings += check_completeness(entries, calls, claims)
    return findings
