"""Database administration: ``verifier db upgrade``, ``db copy`` and ``prune``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from verifier.app import maintenance
from verifier.app.maintenance import Cutoff, PrunePlan
from verifier.cli.options import actor, config_option, emit, exit_with, format_option, progress, say
from verifier.errors import ConfigError
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.config import Config


@click.group("db")
def db_group() -> None:
    """Database administration."""


@db_group.command("upgrade")
@config_option
def db_upgrade_command(config: Config) -> None:
    """Migrate the database to the latest schema."""
    maintenance.migrate(config)
    emit("database is at the latest revision\n")


@db_group.command("copy", short_help="Copy the embedded store to an empty PostgreSQL database.")
@click.option(
    "--to",
    "target",
    required=True,
    metavar="URL",
    envvar="VERIFIER_COPY_TO",
    help="The PostgreSQL database, empty (also $VERIFIER_COPY_TO, to keep a password "
    "out of the process list).",
)
@config_option
@format_option
def db_copy_command(target: str, config: Config, fmt: str) -> None:
    """Copy the configured SQLite store into an empty PostgreSQL database, migrated first.

    The copy is checked before it is committed: row counts and a SHA-256 of every
    table on both sides, and each report against its report_sha256. Progress goes
    to stderr.
    """
    result = maintenance.copy(config, target, progress=progress)
    emit(render.dumps(result.to_dict()) if fmt == "json" else render.copy_text(result))


def _cutoff(ctx: click.Context, param: click.Parameter, value: str) -> Cutoff:
    # Parsed as the command line is read: a date in the future is refused before anything.
    return Cutoff.parse(value)


@click.command("prune", short_help="Drop old report bytes and test logs; verdicts stay.")
@click.option(
    "--before",
    required=True,
    metavar="DATE",
    callback=_cutoff,
    help="Sessions that ended before this date (YYYY-MM-DD, midnight UTC, or an ISO datetime).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@config_option
@format_option
def prune_command(before: Cutoff, yes: bool, config: Config, fmt: str) -> None:
    """Drop the report bytes and test logs of sessions that ended before DATE (admin).

    Verdicts, findings, check statuses and every hash are kept; a pruned session
    can never be verified again. Sessions never verified keep their report.
    Export the evidence you must keep first.
    """

    def review(plan: PrunePlan) -> bool:
        say(render.prune_plan_text(plan, before.text))
        if yes:
            return True
        try:
            return click.confirm("Prune them?", err=True)
        except click.exceptions.Abort:
            raise ConfigError("--yes: no answer to the confirmation; pass --yes") from None

    say(render.PRUNE_WARNING)
    result = maintenance.prune(
        config, before.moment, actor=actor(), review=review, progress=progress
    )
    if result is None:
        say("nothing was pruned")
        exit_with(1)
    emit(
        render.dumps(result.to_dict()) if fmt == "json" else render.prune_text(result, before.text)
    )
