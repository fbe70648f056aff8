"""``verifier demo``: sample sessions on a sample repository, done versus delivered."""

from __future__ import annotations

from pathlib import Path

import click

from verifier.agent.model import gemini_from_env
from verifier.cli.options import format_option, progress
from verifier.demo import geminicli as gemini_demo
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
@click.option(
    "--gemini-cli",
    "gemini_cli",
    is_flag=True,
    help="Scripted sessions of the real gemini-cli (0.61.0), recorded by our hooks "
    "(docs/gemini-cli.md); says how to install gemini-cli when it is missing.",
)
@format_option
def demo_command(workdir: Path, live: bool, gemini_cli: bool, fmt: str) -> None:
    """Build a sample repository and sessions, verify them, and compare done with delivered."""
    if gemini_cli:
        if live:
            raise click.UsageError("--gemini-cli and --live cannot be combined")
        gemini_demo.run(workdir, fmt, progress)
        return
    demo.run(workdir, fmt, gemini_from_env() if live else None, progress)
