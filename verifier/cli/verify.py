"""``verifier verify``: one session report verified, its verdict printed and stored."""

from __future__ import annotations

from pathlib import Path

import click

from verifier.app import pipeline
from verifier.cli.options import config_option, emit, exit_with, format_option, progress
from verifier.config import Config, parse_command
from verifier.formats import render


@click.command("verify")
@click.argument("report", metavar="REPORT|-")
@click.option(
    "--repo",
    "repo_path",
    type=click.Path(file_okay=False, path_type=Path),
    help="The repository (default: the configured path of repo.name).",
)
@click.option(
    "--repo-name",
    metavar="NAME",
    help="The configured repository whose policy applies (default: repo.name).",
)
@config_option
@click.option("--test-command", help="Test command, split like a shell would (never run by one).")
@click.option("--test-timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds.")
@click.option("--no-store", is_flag=True, help="Print the verdict without storing it.")
@format_option
def verify_command(
    report: str,
    repo_path: Path | None,
    repo_name: str | None,
    config: Config,
    test_command: str | None,
    test_timeout: float | None,
    no_store: bool,
    fmt: str,
) -> None:
    """Verify one session report, print the verdict and store it."""
    command = parse_command(test_command, "--test-command") if test_command is not None else None
    outcome = pipeline.verify_file(
        config,
        report,
        repo_path=repo_path,
        repo_name=repo_name,
        test_command=command,
        test_timeout_s=test_timeout,
        store=not no_store,
        progress=None if fmt == "json" else progress,
    )
    if fmt == "json":
        emit(render.verification_json(outcome.verification, outcome.stored))
    else:
        emit(render.verification_text(outcome.verification, outcome.stored))
    exit_with(outcome.exit_code)
