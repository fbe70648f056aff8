"""Checking a JSONL trail file on its own, as the recorder writes it (one entry a line).

`check_trail_file` reads the lines in order, holds the entries to the chain's
rules (`audit.chain.verify_chain`: shape, session, contiguous ``seq``, ``prev``
links from the genesis value, each hash, timestamps, start and end), and says:

* ``intact``: every entry holds and the last is ``session_end``;
* ``unfinished``: every entry holds, but the session did not end (no
  ``session_end``, or a last line cut short by a crash: no newline and no JSON);
* ``broken``: the first bad line, by number, and why.

`count` is the number of intact entries: all of them, or those before the
first bad line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from audit.chain import verify_chain
from audit.findings import Finding

__all__ = ["TrailCheck", "check_trail_file", "check_trail_lines"]

Status = Literal["intact", "unfinished", "broken"]
EXIT_CODES: dict[str, int] = {"intact": 0, "broken": 1, "unfinished": 3}

_ENTRY_AT = re.compile(r"audit\.entries\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class TrailCheck:
    """What a trail file holds: its status, the intact entries, and the first problem."""

    status: Status
    count: int
    session_id: str | None
    line: int | None = None  # the first bad line (1-based), when broken
    code: str | None = None  # the finding's code (`audit.*`), when broken
    problem: str | None = None  # why that line is bad, or why the trail is unfinished

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "count": self.count,
            "session_id": self.session_id,
            "line": self.line,
            "code": self.code,
            "problem": self.problem,
        }


def check_trail_file(path: Path, *, session_id: str | None = None) -> TrailCheck:
    """Check the trail at `path` (see the module's docstring); OSError when unreadable."""
    return check_trail_lines(path.read_bytes(), session_id=session_id)


def check_trail_lines(data: bytes, *, session_id: str | None = None) -> TrailCheck:
    """Check a trail's bytes; `session_id` (default: the first entry's) must be every entry's."""
    lines = data.split(b"\n")
    torn = lines.pop()  # after the last newline: empty, or a line the writer did not finish
    entries: list[Any] = []
    for number, line in enumerate(lines, start=1):
        try:
            entries.append(json.loads(line))
        except ValueError as exc:
            why = "an empty line" if not line.strip() else f"not JSON ({exc})"
            return _broken(entries, session_id, number, "audit.entry_malformed", why)
    if torn:
        try:
            entries.append(json.loads(torn))
        except ValueError:
            torn_at = len(lines) + 1
            result = _judge(entries, session_id)
            if result.status == "broken":
                return result
            return TrailCheck(
                "unfinished",
                len(entries),
                result.session_id,
                problem=f"line {torn_at} is cut short (no newline, not JSON): a crash while "
                "it was written",
            )
    return _judge(entries, session_id)


def _judge(entries: list[Any], session_id: str | None) -> TrailCheck:
    if session_id is None and entries and isinstance(entries[0], dict):
        first = entries[0].get("session_id")
        session_id = first if isinstance(first, str) else None
    if not entries:
        return TrailCheck("unfinished", 0, session_id, problem="the trail has no entry")
    last = entries[-1]
    head = last.get("hash") if isinstance(last, dict) else None
    findings = verify_chain(entries, session_id=session_id or "", count=len(entries), head=head)
    unfinished = [f for f in findings if f.code == "audit.last_not_end"]
    bad = [f for f in findings if f.code != "audit.last_not_end"]
    if bad:
        first_bad = min(bad, key=lambda f: _index(f, len(entries)))
        at = _index(first_bad, len(entries))
        return TrailCheck(
            "broken", at, session_id, line=at + 1, code=first_bad.code, problem=_why(first_bad)
        )
    if unfinished:
        return TrailCheck(
            "unfinished",
            len(entries),
            session_id,
            problem=f"the last entry (line {len(entries)}) is not session_end: the session "
            "did not finish",
        )
    return TrailCheck("intact", len(entries), session_id)


def _broken(
    entries: list[Any], session_id: str | None, number: int, code: str, why: str
) -> TrailCheck:
    """Line `number` cannot be read: broken there, unless an earlier line already is."""
    earlier = _judge(entries, session_id) if entries else None
    if earlier is not None and earlier.status == "broken":
        return earlier
    sid = earlier.session_id if earlier is not None else session_id
    return TrailCheck("broken", number - 1, sid, line=number, code=code, problem=why)


def _index(finding: Finding, n: int) -> int:
    """The entry a finding is about; one past the end for a finding about the whole trail."""
    m = _ENTRY_AT.match(finding.path or "")
    return int(m.group(1)) if m else n


def _why(finding: Finding) -> str:
    parts = [finding.message]
    if finding.expected is not None or finding.found is not None:
        parts.append(f"(got {finding.found}, expected {finding.expected})")
    return " ".join(parts)
