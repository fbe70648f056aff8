"""Audit-trail verification, usable offline without the verifier.

`verify_trail` checks a session report's `audit` object in order:

1. read `audit.entries` (a list), `audit.count` and `audit.head`;
2. `verify_chain`: entry shape, versions, session, contiguous `seq`, `prev` links
   from the genesis value, each entry's hash, timestamps, the start and end
   entries, `count` and `head`;
3. `check_completeness`: one `tool_call` entry per trajectory call (same id, tool
   and arguments hash), every response present with its hash, no effects on a
   denied call, and the effects composed in order against the claimed changes.

Every problem is a `Finding` with a stable `audit.*` code; none is raised.

The harness's side is imported on its own, so that this package stays light:
`audit.recorder` (records a google-genai session into a v1 report),
`audit.signing` (Ed25519 or HMAC signatures), `audit.upload` (to a file, or
posted to the service) and `audit.trailfile` (a JSONL trail checked alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit._collect import json_type
from audit.chain import (
    DECISIONS,
    ENTRY_DOMAIN,
    GENESIS_PREFIX,
    KINDS,
    entry_hash,
    genesis,
    seal,
    verify_chain,
)
from audit.completeness import Call, Change, check_completeness
from audit.findings import Finding
from audit.jcs import CanonicalizationError, canonicalize, jcs_sha256, sha256_hex

__all__ = [
    "DECISIONS",
    "ENTRY_DOMAIN",
    "GENESIS_PREFIX",
    "KINDS",
    "Call",
    "CanonicalizationError",
    "Change",
    "Finding",
    "canonicalize",
    "check_completeness",
    "entry_hash",
    "genesis",
    "jcs_sha256",
    "json_type",
    "seal",
    "sha256_hex",
    "verify_chain",
    "verify_trail",
]


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
