"""``verifier config show``: the configuration in force."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from verifier.app import settings
from verifier.cli.options import config_option, emit, format_option
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.config import Config


@click.group("config")
def config_group() -> None:
    """The configuration in force."""


@config_group.command("show")
@config_option
@format_option
def config_show_command(config: Config, fmt: str) -> None:
    """Which file was read, and the effective settings (secrets masked)."""
    shown = settings.settings(config)
    emit(render.dumps(shown.to_dict()) if fmt == "json" else render.settings_text(shown))
