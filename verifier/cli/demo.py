"""``verifier demo``: sample sessions on a sample repository, done versus delivered."""

from __future__ import annotations

from pathlib import Path

import click

from verifier.agent.model import gemini_from_env
from verifier.cli.options import format_option, progress
from verifier.demo import run as demo


@click.command("demo", short_help="Sample sessions on a sample repository: done versus delivered.")
@click.option(
    "--dir",
    "workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("demo-out"),
    show_default=True,
    help="Where the sample repository, reports and store are written (a folder the demo made).",
)
@click.option(
    "--live",
    is_flag=True,
    help="The scenarios' tasks done by the real Gemini API (GEMINI_API_KEY, GEMINI_MODEL).",
)
@format_option
def demo_command(workdir: Path, live: bool, fmt: str) -> None:
    """Build a sample repository and sessions, verify them, and compare done with delivered."""
    demo.run(workdir, fmt, gemini_from_env() if live else None, progress)
