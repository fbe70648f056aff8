"""Stored sessions: ``verifier ingest``, ``show``, ``list`` and ``override``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from verifier.app import sessions
from verifier.cli.options import actor, config_option, emit, exit_with, format_option, say
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.config import Config


@click.command("ingest")
@click.argument("reports", nargs=-1, required=True, metavar="REPORT...")
@config_option
@format_option
def ingest_command(reports: tuple[str, ...], config: Config, fmt: str) -> None:
    """Store session reports without verifying them."""

    def progress(line: str) -> None:
        click.echo(f"… {line}", err=True)

    many = fmt == "text" and len(reports) > 1
    ingestion = sessions.ingest(config, reports, progress=progress if many else None)
    emit(render.ingest_json(ingestion) if fmt == "json" else render.ingest_text(ingestion))
    exit_with(ingestion.exit_code)


@click.command("show", short_help="A stored session with its runs and latest findings.")
@click.argument("session_id")
@config_option
@format_option
def show_command(session_id: str, config: Config, fmt: str) -> None:
    """Show a stored session, its verification runs and the latest findings."""
    view = sessions.show(config, session_id)
    emit(render.session_json(view) if fmt == "json" else render.session_text(view))


@click.command("list", short_help="Stored sessions, verdicts, done and delivered rates.")
@config_option
@format_option
def list_command(config: Config, fmt: str) -> None:
    """List stored sessions with their verdict, and the done and delivered rates."""
    listing = sessions.listing(config, notice=say)
    emit(render.listing_json(listing) if fmt == "json" else render.listing_text(listing))


@click.command("override", short_help="Record a person's verdict beside the computed one.")
@click.argument("session_id")
@click.option(
    "--status",
    required=True,
    type=click.Choice(["delivered", "not_delivered", "cleared"]),
    help="cleared withdraws the standing override.",
)
@click.option("--reason", required=True, help="Why: kept with the override, and in the admin log.")
@config_option
@format_option
def override_command(session_id: str, status: str, reason: str, config: Config, fmt: str) -> None:
    """Override SESSION_ID's verdict. The computed verdict, its runs and the stats are
    unchanged: both verdicts are shown and exported; a merge gate uses the override."""
    done = sessions.override(config, session_id, status=status, reason=reason, author=actor())
    emit(render.dumps(done.to_dict()) if fmt == "json" else render.override_text(done))
