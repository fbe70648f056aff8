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

The names below are loaded when first used (PEP 562), so that importing a part
of the package does not import them all: gemini-cli starts our hook
(`audit.geminicli.hook`) as a new process for every tool call.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from audit.verification import verify_trail

_EXPORTS = {
    "json_type": "audit._collect",
    **dict.fromkeys(
        (
            "DECISIONS",
            "ENTRY_DOMAIN",
            "GENESIS_PREFIX",
            "KINDS",
            "entry_hash",
            "genesis",
            "seal",
            "verify_chain",
        ),
        "audit.chain",
    ),
    **dict.fromkeys(("Call", "Change", "check_completeness"), "audit.completeness"),
    "Finding": "audit.findings",
    **dict.fromkeys(
        ("CanonicalizationError", "canonicalize", "jcs_sha256", "sha256_hex"), "audit.jcs"
    ),
    "verify_trail": "audit.verification",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'audit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
