"""``verifier gate``: may this be merged?

The selection and the decision are `verifier.app.gate` (`judge`), the formats
`verifier.formats.gate`; this module reads the options and the environment, and
writes the output.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from verifier.app import gate
from verifier.cli.options import config_loader_option, emit, exit_with, output_format, progress, say
from verifier.formats import gate as gate_formats

if TYPE_CHECKING:
    from verifier.config import Config

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


@click.command(
    "gate",
    short_help="May this be merged? Exit 0 when every selected session is delivered.",
)
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="A session (repeatable)."
)
@click.option(
    "--commit",
    "commits",
    multiple=True,
    metavar="SHA",
    help="Sessions whose head is this commit: a SHA, abbreviated, or a ref of --repo (repeatable).",
)
@click.option(
    "--branch",
    "branches",
    multiple=True,
    metavar="NAME",
    help="Sessions of this branch (repeatable).",
)
@click.option(
    "--rev-range",
    "rev_ranges",
    multiple=True,
    metavar="BASE..HEAD",
    help="Sessions whose head commit is in this range of --repo (git rev-list BASE..HEAD; "
    "repeatable: every range is judged).",
)
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    help="The git repository that resolves --commit and --rev-range (default: the current folder).",
)
@click.option(
    "--server",
    metavar="URL",
    help="Read a verifier service; the read token comes from "
    f"${gate.TOKEN_ENV} (default: the store).",
)
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=0,
    metavar="SECONDS",
    help="Wait up to this long for pending sessions to be verified and reports not posted "
    "yet, with progress on stderr.",
)
@click.option(
    "--inconclusive",
    type=click.Choice(["fail", "pass"]),
    default="fail",
    show_default=True,
    help="Whether an inconclusive or pending session blocks (exit 3) or not.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Exit 0 when no session is selected (else 1), from a store or server that holds "
    "sessions of this repository (else 3).",
)
@output_format(
    *gate_formats.FORMATS,
    help=f"github: annotations, and a Markdown table into ${SUMMARY_ENV} when set.",
)
@config_loader_option(
    help="Configuration file, for the local store (default: $VERIFIER_CONFIG, ...)."
)
def gate_command(
    session_ids: tuple[str, ...],
    commits: tuple[str, ...],
    branches: tuple[str, ...],
    rev_ranges: tuple[str, ...],
    repo: Path | None,
    server: str | None,
    wait_s: float,
    inconclusive: str,
    allow_empty: bool,
    fmt: str,
    config: Callable[[], Config],
) -> None:
    """May this be merged? Judge the selected sessions on their verdict (an override, when
    one stands, wins). Every selector may be repeated; all are judged together.

    Exit 0 when every selected session is delivered; 1 when any is not delivered, or
    none is selected (0 with --allow-empty); 3 when any is inconclusive or still
    pending after --wait (unless --inconclusive=pass), and when the verdicts cannot
    be read: no store, a store that cannot be read or holds no session of this
    repository, a server that does not answer or refuses the token; 2 on a usage
    error.
    """
    if not (session_ids or commits or branches or rev_ranges):
        raise click.UsageError("select sessions: give --session, --commit, --branch or --rev-range")
    decision = gate.judge(
        config,
        session_ids=session_ids,
        commits=commits,
        branches=branches,
        rev_ranges=rev_ranges,
        repo=repo,
        server=server,
        token=os.environ.get(gate.TOKEN_ENV),
        wait_s=wait_s,
        inconclusive=inconclusive,
        allow_empty=allow_empty,
        progress=progress if wait_s else None,
        notice=say,
    )
    if fmt == "github":
        output = gate_formats.render_github(decision)
        _write_summary(output.summary)
        emit(output.stdout)
    else:
        emit(gate_formats.render(decision, fmt))
    exit_with(decision.exit_code)


def _write_summary(markdown: str) -> None:
    """Append the step summary to $GITHUB_STEP_SUMMARY, when GitHub set it."""
    target = os.environ.get(SUMMARY_ENV)
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as summary:
            summary.write(markdown)
    except OSError as exc:
        # The verdict stands without its summary: say so, and keep the exit code.
        say(f"cannot append to ${SUMMARY_ENV} {target!r}: {exc}")
