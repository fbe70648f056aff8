"""Findings: what broke, as data.

A finding has a stable `code` (documented in docs/findings.md), a message for
people, and where it applies the `path`, what was `expected` and what was
`found`. The same object feeds the CLI, the store and evidence bundles; nobody
re-derives it from the message text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    message: str
    path: str | None = None
    expected: str | None = None
    found: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: optional keys are left out when empty."""
        return {k: v for k, v in asdict(self).items() if v is not None}
