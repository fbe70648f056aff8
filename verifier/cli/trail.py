"""``verifier trail verify``: a JSONL audit trail checked on its own.

Exit 0 intact and complete, 1 broken (the first bad line named), 3 intact but
unfinished (no ``session_end``, or a last line cut short by a crash); 2 a usage
error (the file cannot be read).
"""

from __future__ import annotations

from pathlib import Path

import click

from verifier.app import trail
from verifier.cli.options import emit, exit_with, format_option
from verifier.formats import render


@click.group("trail")
def trail_group() -> None:
    """Audit trails (JSONL, as a recorder writes them), checked on their own."""


@trail_group.command("verify")
@click.argument("path", metavar="FILE.jsonl", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--session", "session_id", help="The session every entry must name.")
@format_option
def trail_verify_command(path: Path, session_id: str | None, fmt: str) -> None:
    """Check a trail file's chain: exit 0 intact and complete, 1 broken (the first bad
    line named), 3 intact but unfinished (a crash, or no session_end)."""
    result = trail.check_file(path, session_id=session_id)
    emit(render.trail_json(path, result) if fmt == "json" else render.trail_text(path, result))
    exit_with(result.exit_code)
