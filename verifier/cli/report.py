"""``verifier report check``: a session report checked offline."""

from __future__ import annotations

from pathlib import Path

import click

from verifier.app import reportcheck
from verifier.cli.options import emit, exit_with, format_option
from verifier.formats import render


@click.group("report")
def report_group() -> None:
    """Session reports, checked offline."""


@report_group.command("check")
@click.argument("report", metavar="REPORT|-")
@click.option(
    "--explain", is_flag=True, help="Show the canonical bytes behind each hash that does not match."
)
@click.option(
    "--profile-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Tool profiles (default: the packaged ones).",
)
@format_option
def report_check_command(report: str, explain: bool, profile_dir: Path | None, fmt: str) -> None:
    """Check a report offline: contract, audit chain, completeness, effects against claims.

    Exit 0 valid with no finding, 1 findings, 2 not a valid report.
    """
    result = reportcheck.check_file(report, profile_dir)
    to_text = render.report_check_json if fmt == "json" else render.report_check_text
    emit(to_text(result, explain=explain))
    exit_with(result.exit_code)
