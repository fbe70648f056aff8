"""Tool profiles against the stored sessions: ``verifier adapters shadow|inventory``."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import click

from verifier.app import adapters
from verifier.cli.options import config_option, emit, exit_with, format_option, given_moment, say
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.config import Config


@click.group("adapters")
def adapters_group() -> None:
    """Tool profiles against the stored sessions: shadow mode and the migration inventory."""


@adapters_group.command("shadow", short_help="Run two tool profiles over stored sessions.")
@click.option("--old", "old", required=True, metavar="PROFILE", help="The profile in use.")
@click.option("--new", "new", required=True, metavar="PROFILE", help="The profile to switch to.")
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="Only this session (repeatable)."
)
@click.option(
    "--since",
    metavar="DATE",
    callback=given_moment,
    help="Only sessions that ended at or after DATE (YYYY-MM-DD, or an ISO datetime).",
)
@format_option
@config_option
def adapters_shadow_command(
    old: str,
    new: str,
    session_ids: tuple[str, ...],
    since: datetime | None,
    fmt: str,
    config: Config,
) -> None:
    """Normalise every stored call with both profiles, executing nothing, and list each
    difference: unrecognised names, missing or extra fields, values, permissions, actions.

    Exit 0 when the profiles agree on everything that matters, 1 when they do not.
    """
    if session_ids and since is not None:
        raise click.UsageError("give --session or --since, not both")
    result = adapters.shadow(config, old, new, session_ids, since, notice=say)
    emit(render.dumps(render.shadow_dict(result)) if fmt == "json" else render.shadow_text(result))
    exit_with(result.exit_code)


@adapters_group.command("inventory", short_help="Function names and argument shapes stored.")
@format_option
@config_option
def adapters_inventory_command(fmt: str, config: Config) -> None:
    """Every function name and argument shape seen in the stored sessions, with counts,
    and which tool profiles cover each."""
    result = adapters.inventory(config, notice=say)
    emit(
        render.dumps(render.inventory_dict(result))
        if fmt == "json"
        else render.inventory_text(result)
    )
