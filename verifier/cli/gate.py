"""`verifier gate`: the merge gate's command (registered by `verifier.cli.main`).

Selection and decision are `verifier.app.gate`, the formats `verifier.formats.gate`;
this module reads the options and the environment, and writes the output.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from verifier.errors import ConfigError

if TYPE_CHECKING:
    from verifier.app.gate import GateSelection, GateSession, Watched

TOKEN_ENV = "VERIFIER_TOKEN"
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
    metavar="BASE..HEAD",
    help="Sessions whose head commit is in this range of --repo (git rev-list BASE..HEAD).",
)
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    help="The git repository that resolves --commit and --rev-range (default: the current folder).",
)
@click.option(
    "--server",
    metavar="URL",
    help=f"Read a verifier service; the read token comes from ${TOKEN_ENV} (default: the store).",
)
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=0,
    metavar="SECONDS",
    help="Wait up to this long for pending sessions to be verified, with progress on stderr.",
)
@click.option(
    "--inconclusive",
    type=click.Choice(["fail", "pass"]),
    default="fail",
    show_default=True,
    help="Whether an inconclusive or pending session blocks (exit 3) or not.",
)
@click.option("--allow-empty", is_flag=True, help="Exit 0 when no session is selected (else 1).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "junit", "github", "sarif"]),
    default="text",
    show_default=True,
    help=f"github: annotations, and a Markdown table into ${SUMMARY_ENV} when set.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configuration file, for the local store (default: $VERIFIER_CONFIG, ...).",
)
def gate_cmd(
    session_ids: tuple[str, ...],
    commits: tuple[str, ...],
    branches: tuple[str, ...],
    rev_range: str | None,
    repo: Path | None,
    server: str | None,
    wait_s: float,
    inconclusive: str,
    allow_empty: bool,
    fmt: str,
    config_path: Path | None,
) -> None:
    """May this be merged? Judge the selected sessions on their verdict (an override, when
    one stands, wins).

    Exit 0 when every selected session is delivered; 1 when any is not delivered, or
    none is selected (0 with --allow-empty); 3 when any is inconclusive or still
    pending after --wait (unless --inconclusive=pass); 2 on a usage error, or a
    server that cannot be reached or refuses the token.
    """
    from verifier.app import gate
    from verifier.cli.common import _emit
    from verifier.cli.main import _Exit
    from verifier.formats import gate as gate_formats
    from verifier.formats import render

    if not (session_ids or commits or branches or rev_range):
        raise click.UsageError("select sessions: give --session, --commit, --branch or --rev-range")
    selection = gate.resolve_selection(
        session_ids=session_ids, commits=commits, branches=branches, rev_range=rev_range, repo=repo
    )
    progress = render.progress_printer() if wait_s else None
    if server is not None:
        token = os.environ.get(TOKEN_ENV)
        if token is None:
            raise ConfigError(f"--server: ${TOKEN_ENV} is not set: put the read token there")
        source = gate.ServerSource(server, token)
        try:
            watched = gate.watch(lambda: source.read(selection), wait_s, progress=progress)
        finally:
            source.close()
        described = source.description
    else:
        watched, described = _from_store(selection, wait_s, progress, config_path)
    decision = gate.decide(
        watched.sessions,
        selection,
        inconclusive=inconclusive,
        allow_empty=allow_empty,
        source=described,
        waited_s=watched.waited_s if wait_s else None,
    )
    if fmt == "github":
        output = gate_formats.render_github(decision)
        _write_summary(output.summary)
        _emit(output.stdout)
    else:
        _emit(gate_formats.render(decision, fmt))
    raise _Exit(decision.exit_code)


def _from_store(
    selection: GateSelection,
    wait_s: float,
    progress: Callable[[str], None] | None,
    config_path: Path | None,
) -> tuple[Watched, str]:
    """The selected sessions from the configured store, opened read-only; a store that
    does not exist yet holds no session (it is looked for again while waiting)."""
    from verifier.app import gate
    from verifier.config import Config, mask_url
    from verifier.store import NoStore, Store

    config = Config.load(config_path)
    description = f"store {mask_url(config.database_url)}"
    opened: list[Store] = []
    said: list[str] = []

    def read() -> list[GateSession]:
        if not opened:
            try:
                opened.append(Store.open(config.database_url, read_only=True))
            except NoStore as exc:
                if not said:  # once, not at every reading while waiting
                    said.append(str(exc))
                    click.echo(f"verifier: {exc}", err=True)
                return gate.StoreSource.nothing(selection)
        return gate.StoreSource(opened[0], description).read(selection)

    try:
        return gate.watch(read, wait_s, progress=progress), description
    finally:
        for store in opened:
            store.close()


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
        click.echo(f"verifier: cannot append to ${SUMMARY_ENV} {target!r}: {exc}", err=True)
