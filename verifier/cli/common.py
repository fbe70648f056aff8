"""What every module of the command line shares: the `--format` and `--config` options,
writing to stdout, and who acts. A module of its own, so that the commands kept
in other modules (`cli_ops`, `evidence_cli`) import it rather than `verifier.cli.main`,
which imports them to register them."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from verifier.errors import BadRequest
from verifier.moments import parse_moment

_Option = Callable[[Callable[..., Any]], Callable[..., Any]]
format_option: _Option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json prints one object for scripts.",
)
config_option: _Option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configuration file (default: $VERIFIER_CONFIG, ~/.config/verifier/verifier.toml, "
    "/etc/verifier/verifier.toml).",
)


def moment(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """The callback of an option that takes a moment (`verifier.moments.parse_moment`)."""
    if value is None:
        return None
    try:
        return parse_moment(value, param.opts[0])
    except BadRequest as exc:
        raise click.BadParameter(exc.problem) from None


def _emit(text: str) -> None:
    """Write to stdout; a reader that went away (`| head -1`) ends the output quietly."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_gone()


def _stdout_gone() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _actor() -> str:
    """Who acts from this command line, for the admin log: ``cli:<user>``."""
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = str(os.getuid())
    return f"cli:{user}"
