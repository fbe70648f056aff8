"""`verifier trail verify`: a JSONL audit trail checked on its own (the logic is `audit.trailfile`).

Registered at the end of `verifier.cli.main`. Exit 0 intact and complete, 1 broken
(the first bad line named), 3 intact but unfinished (no ``session_end``, or a
last line cut short by a crash); 2 a usage error (the file cannot be read).
"""

from __future__ import annotations

from pathlib import Path

import click

from verifier.errors import ConfigError


def register(main: click.Group) -> None:
    """Add the ``trail`` group to `main` (called at the end of `verifier.cli.main`)."""
    from verifier.cli.common import format_option

    @main.group("trail")
    def trail_group() -> None:
        """Audit trails (JSONL, as a recorder writes them), checked on their own."""

    @trail_group.command("verify")
    @click.argument("trail", metavar="FILE.jsonl", type=click.Path(dir_okay=False, path_type=Path))
    @click.option("--session", "session_id", help="The session every entry must name.")
    @format_option
    def trail_verify_cmd(trail: Path, session_id: str | None, fmt: str) -> None:
        """Check a trail file's chain: exit 0 intact and complete, 1 broken (the first bad
        line named), 3 intact but unfinished (a crash, or no session_end)."""
        from audit.trailfile import check_trail_file
        from verifier.cli.common import _emit
        from verifier.cli.main import _Exit
        from verifier.formats import render

        try:
            result = check_trail_file(trail, session_id=session_id)
        except OSError as exc:
            raise ConfigError(f"cannot read trail {str(trail)!r}: {exc.strerror}") from None
        if fmt == "json":
            _emit(render.dumps({"trail": str(trail), **result.as_dict()}))
        else:
            _emit(_text(trail, result.status, result.count, result.line, result.problem))
        raise _Exit(result.exit_code)


def _text(trail: Path, status: str, count: int, line: int | None, problem: str | None) -> str:
    entries = f"{count} intact entr{'y' if count == 1 else 'ies'}"
    if status == "intact":
        return f"{trail}: intact and complete, {entries}\n"
    if status == "unfinished":
        return f"{trail}: intact but unfinished, {entries}: {problem}\n"
    return f"{trail}: broken at line {line}: {problem}; {entries} before it\n"
