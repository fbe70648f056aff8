"""Plumbing shared by the checks: a bounded finding list and value display.

Not a public API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from audit.findings import Finding

#: Findings kept per code before the rest are only counted, so that one cause
#: repeated over a long trail (a harness that hashes wrongly, a trail from another
#: session) reads as a few examples and a total, not thousands of lines.
MAX_PER_CODE = 20


class Findings:
    """Findings in the order they were found, at most `limit` per code."""

    def __init__(self, limit: int = MAX_PER_CODE) -> None:
        self._limit = limit
        self._kept: list[Finding] = []
        self._seen: dict[str, int] = {}

    def add(
        self,
        code: str,
        message: str,
        path: str | None = None,
        expected: str | None = None,
        found: str | None = None,
    ) -> None:
        n = self._seen.get(code, 0) + 1
        self._seen[code] = n
        if n <= self._limit:
            self._kept.append(Finding(code, message, path, expected, found))

    def result(self) -> list[Finding]:
        """The kept findings, then one summary finding per code that overflowed."""
        out = list(self._kept)
        for code, n in self._seen.items():
            if n > self._limit:
                out.append(
                    Finding(code, f"{n - self._limit} more {code} findings not listed ({n} in all)")
                )
        return out


def json_type(value: Any) -> str:
    """The JSON name of `value`'s type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def show(value: Any, limit: int = 80) -> str:
    """`value` as short JSON text, for `found`."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True, default=repr)
    except (ValueError, TypeError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
