"""API tokens: ``verifier token create|list|revoke``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from verifier.app import tokens
from verifier.cli.options import actor, config_option, emit, format_option, moment
from verifier.formats import render
from verifier.store.tokens import SCOPES

if TYPE_CHECKING:
    from verifier.config import Config


@click.group("token")
def token_group() -> None:
    """API tokens: create, list, revoke (each act goes into the admin log)."""


def _expiry(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """--expires: a moment (a date: the token expires as that day begins, UTC), not past."""
    when = moment(ctx, param, value)
    if when is not None and when <= datetime.now(UTC):
        raise click.BadParameter(f"{value!r} is in the past")
    return when


@token_group.command("create")
@click.option(
    "--scope",
    required=True,
    type=click.Choice(SCOPES),
    help="ingest posts reports; read reads sessions, stats and /metrics; admin does all.",
)
@click.option("--name", required=True, help="Who or what holds it (shown in the admin log).")
@click.option(
    "--expires", metavar="DATE", callback=_expiry, help="Expiry: 2027-01-31 or an ISO time."
)
@click.option(
    "--agent", metavar="NAME", help="Bind an ingest token to one agent: it posts only its reports."
)
@config_option
@format_option
def token_create_command(
    scope: str,
    name: str,
    expires: datetime | None,
    agent: str | None,
    config: Config,
    fmt: str,
) -> None:
    """Create a token and print it, once: only its hash is stored."""
    created = tokens.create(
        config, name=name, scope=scope, actor=actor(), expires_at=expires, agent=agent
    )
    if fmt == "json":
        emit(render.token_created_json(created))
        return
    click.echo(render.token_created_note(created), err=True)
    emit(created.secret + "\n")


@token_group.command("list")
@config_option
@format_option
def token_list_command(config: Config, fmt: str) -> None:
    """Every token: scope, state, who created it; never the secret."""
    views = tokens.tokens(config)
    emit(render.tokens_json(views) if fmt == "json" else render.tokens_text(views))


@token_group.command("revoke")
@click.argument("token_id", metavar="ID", type=int)
@config_option
@format_option
def token_revoke_command(token_id: int, config: Config, fmt: str) -> None:
    """Revoke a token: requests with it are refused (401) from now on."""
    revoked = tokens.revoke(config, token_id, actor=actor())
    emit(render.revoked_json(revoked) if fmt == "json" else render.revoked_text(revoked))
