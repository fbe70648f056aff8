"""``verifier export sessions``: every matching session as CSV or JSON lines."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from verifier.app import export
from verifier.cli.options import config_option, moment, output_format, say
from verifier.store import SessionFilter

if TYPE_CHECKING:
    from verifier.config import Config

# Lines between flushes of the output: a reader sees rows arrive, a big export stays cheap.
FLUSH_EVERY = 500


@click.group("export")
def export_group() -> None:
    """Stored data for other tools."""


@export_group.command("sessions", short_help="Every matching session as CSV or JSON lines.")
@output_format(
    "csv",
    "jsonl",
    help="csv (cells a spreadsheet would run as formulas start with ') or jsonl.",
)
@click.option("--agent", help="Sessions of this agent.")
@click.option("--model", help="Sessions of this model.")
@click.option("--repo", help="Sessions of this repository.")
@click.option("--agent-status", help="The agent's canonical status (done, error, ...).")
@click.option("--done/--not-done", default=None, help="Sessions the agent called done, or not.")
@click.option(
    "--delivery-status",
    type=click.Choice(["pending", "delivered", "not_delivered", "inconclusive"]),
    help="The computed verdict.",
)
@click.option(
    "--head-commit",
    "head_commits",
    multiple=True,
    help="A head commit (repeat for any of several).",
)
@click.option("--branch", help="Sessions on this branch.")
@click.option(
    "--from", "ended_from", callback=moment, help="Ended at or after: a date or an ISO time."
)
@click.option("--to", "ended_to", callback=moment, help="Ended before: a date or an ISO time.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (complete or not at all) instead of stdout.",
)
@config_option
def export_sessions_command(
    fmt: str,
    agent: str | None,
    model: str | None,
    repo: str | None,
    agent_status: str | None,
    done: bool | None,
    delivery_status: str | None,
    head_commits: tuple[str, ...],
    branch: str | None,
    ended_from: datetime | None,
    ended_to: datetime | None,
    out: Path | None,
    config: Config,
) -> None:
    """Every session the filters keep (the filters of GET /v1/sessions), newest ended
    first, one row each, written as it is read: no page limit, never all rows in memory.
    Both verdicts are columns: the computed delivery_status, override_status and
    effective_status."""
    filters = SessionFilter(
        agent=agent,
        model=model,
        repo=repo,
        agent_status=agent_status,
        done=done,
        delivery_status=delivery_status,
        head_commits=head_commits or None,
        branch=branch,
        ended_from=ended_from,
        ended_to=ended_to,
    )
    with export.exported(config, filters, fmt, notice=say) as lines:
        if out is None:
            write(lines, sys.stdout)
        else:
            write_file(lines, out)


def write(lines: Iterable[str], stream: IO[str]) -> None:
    """Write the lines as they come, flushed every `FLUSH_EVERY` and at the end."""
    for n, line in enumerate(lines, 1):
        stream.write(line)
        if n % FLUSH_EVERY == 0:
            stream.flush()
    stream.flush()


def write_file(lines: Iterable[str], out: Path) -> None:
    """Write beside `out`, then rename: a failed export leaves no half file behind."""
    partial = out.with_name(out.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as stream:
            write(lines, stream)
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
