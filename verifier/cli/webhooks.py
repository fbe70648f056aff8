"""Webhook notifications: ``verifier webhooks log|retry``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from verifier.app import webhooks
from verifier.cli.options import config_option, emit, format_option, say
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.config import Config


@click.group("webhooks")
def webhooks_group() -> None:
    """Webhook notifications: the delivery log, and due deliveries attempted now."""


@webhooks_group.command("log", short_help="The webhook deliveries, newest first.")
@click.option(
    "--state", type=click.Choice(["pending", "delivered", "failed"]), help="Only this state."
)
@click.option("--session", "session_id", help="Only this session's deliveries.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@config_option
@format_option
def webhooks_log_command(
    state: str | None, session_id: str | None, limit: int, config: Config, fmt: str
) -> None:
    """Each delivery: webhook, event, session, state, attempts, the last answer or error."""
    rows = webhooks.deliveries(config, state=state, session_id=session_id, limit=limit, notice=say)
    emit(render.deliveries_json(rows) if fmt == "json" else render.deliveries_text(rows))


@webhooks_group.command("retry", short_help="Attempt the due webhook deliveries now.")
@config_option
@format_option
def webhooks_retry_command(config: Config, fmt: str) -> None:
    """Attempt every pending delivery whose next attempt is due (what the service's
    periodic work does each round)."""
    counts = webhooks.retry(config)
    emit(render.dumps(counts) if fmt == "json" else render.retried_text(counts))
