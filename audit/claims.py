"""What a recorder composes from its trail, without the google-genai SDK: the claims its
effects make and its timestamps.

`audit.recorder` (a harness's loop) and `audit.geminicli.hook` (gemini-cli's hooks,
a process per event that must start fast) share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from audit.errors import RecorderError

__all__ = ["claims_from_effects", "timestamp"]


def timestamp(moment: datetime) -> str:
    """RFC 3339 UTC with microseconds and ``Z``: `moment` (aware, any offset) in UTC."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise RecorderError(f"got {moment.isoformat()}, expected an aware datetime", "ts")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def claims_from_effects(effects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The claimed changes the composed effects make, by path.

    A path's claim runs from its first effect's before to its last effect's
    after; a path that ends as it began (created then deleted, edited then
    restored) is no claim. Modes are claimed where they changed.
    """
    net: dict[str, list[str | None]] = {}
    for e in effects:
        state = net.setdefault(e["path"], [e["sha256_before"], None, None, None])
        state[1] = e["sha256_after"]
        if e.get("mode_before") is not None:
            state[2] = state[2] or e["mode_before"]
            state[3] = e["mode_after"]
    out: list[dict[str, Any]] = []
    for path, (before, after, mode_before, mode_after) in sorted(net.items()):
        mode_changed = mode_before is not None and mode_before != mode_after
        if before == after and not mode_changed:
            continue
        action = "create" if before is None else "delete" if after is None else "modify"
        claim: dict[str, Any] = {
            "path": path,
            "action": action,
            "sha256_before": before,
            "sha256_after": after,
        }
        if mode_changed:
            if before is not None:
                claim["mode_before"] = mode_before
            if after is not None:
                claim["mode_after"] = mode_after
        out.append(claim)
    return out
