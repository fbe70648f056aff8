"""``verifier verify``: one session report verified, its verdict printed and stored; or a
batch of them (``--batch``), with one summary."""

from __future__ import annotations

from pathlib import Path

import click

from verifier.app import batch as batch_app
from verifier.app import pipeline
from verifier.cli.options import config_option, emit, exit_with, format_option, progress
from verifier.config import Config, parse_command
from verifier.formats import render


@click.command("verify")
@click.argument("report", metavar="REPORT|-", required=False)
@click.option(
    "--batch",
    "batch",
    metavar="FILE.jsonl",
    type=click.Path(dir_okay=False, path_type=Path),
    help='Verify many sessions: JSON lines, each a report or {"report": PATH}.',
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    help="With --batch: sessions verified at once (default: the cores).",
)
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
    report: str | None,
    batch: Path | None,
    jobs: int | None,
    repo_path: Path | None,
    repo_name: str | None,
    config: Config,
    test_command: str | None,
    test_timeout: float | None,
    no_store: bool,
    fmt: str,
) -> None:
    """Verify one session report, print the verdict and store it; or, with --batch, many
    (the first session of each base first, so each base is tested once), and print one
    summary: resolved (delivered) or not, per session and per task."""
    if batch is not None:
        if report is not None:
            raise click.UsageError("give REPORT or --batch, not both")
        given = [
            name
            for name, value in (
                ("--repo", repo_path),
                ("--repo-name", repo_name),
                ("--test-command", test_command),
                ("--test-timeout", test_timeout),
            )
            if value is not None
        ]
        if given:
            raise click.UsageError(
                f"{given[0]}: not with --batch (each report's repo.name decides)"
            )
        done = batch_app.verify_batch(
            config,
            batch,
            jobs=jobs,
            store=not no_store,
            progress=None if fmt == "json" else progress,
        )
        emit(render.batch_json(done) if fmt == "json" else render.batch_text(done))
        exit_with(done.exit_code)
    if report is None:
        raise click.UsageError("give a REPORT (or - for stdin), or --batch FILE.jsonl")
    if jobs is not None:
        raise click.UsageError("--jobs: only with --batch")
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
