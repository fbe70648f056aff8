"""``verifier gemini-cli``: sessions of gemini-cli, Google's agent loop (docs/gemini-cli.md)."""

from __future__ import annotations

from pathlib import Path

import click

from verifier.app import geminicli
from verifier.cli.options import config_option, emit, say
from verifier.config import Config
from verifier.formats import render


@click.group("gemini-cli")
def geminicli_group() -> None:
    """Sessions of gemini-cli: reports from its transcripts."""


@geminicli_group.command("import")
@click.argument("transcript", metavar="TRANSCRIPT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--repo",
    "repo_path",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The repository the session worked in.",
)
@click.option("--base", metavar="REV", help="The commit the session started from (default: HEAD).")
@click.option(
    "--repo-name",
    metavar="NAME",
    help="The report's repo.name (default: the configured repository of that path, else "
    "the folder's name).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report here (default: stdout).",
)
@config_option
def import_command(
    transcript: Path,
    repo_path: Path,
    base: str | None,
    repo_name: str | None,
    out: Path | None,
    config: Config,
) -> None:
    """Make a session report from a gemini-cli transcript recorded without our hooks.

    The report has no audit trail (audit.trail = "none"): verified, it is
    inconclusive (audit.no_trail) unless the repository sets trail = "optional".
    Exit 0 written, 2 a transcript that cannot be read (the line and field named).
    """
    imported = geminicli.import_transcript(
        config, transcript, repo_path, base=base, repo_name=repo_name
    )
    if out is None:
        emit(imported.raw.decode("utf-8"))
    else:
        geminicli.save(imported, out)
        emit(render.imported_text(imported.report, out))
    for note in imported.notes:
        say(note)
