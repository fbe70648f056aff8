"""A JSONL audit trail checked on its own: the command of ``verifier trail verify``.

The check is `audit.trailfile` (the audit package alone, offline); this reads the
file for it.
"""

from __future__ import annotations

from pathlib import Path

from audit.trailfile import TrailCheck, check_trail_file
from verifier.errors import ConfigError


def check_file(path: Path, *, session_id: str | None = None) -> TrailCheck:
    """The trail at `path` held to the chain's rules (every entry of `session_id`, when
    given): intact, unfinished or broken; `ConfigError` when the file cannot be read."""
    try:
        return check_trail_file(path, session_id=session_id)
    except OSError as exc:
        raise ConfigError(f"cannot read trail {str(path)!r}: {exc.strerror}") from None
