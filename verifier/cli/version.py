"""``verifier version``: an example command (added to show what a command touches)."""

from __future__ import annotations

import json

import click

from verifier import __version__
from verifier.cli.options import emit, format_option


@click.command("version", short_help="The verifier's version.")
@format_option
def version_command(fmt: str) -> None:
    """Print the verifier's version."""
    emit(json.dumps({"version": __version__}) + "\n" if fmt == "json" else f"{__version__}\n")
