"""What the command modules share: the ``--format`` and ``--config`` options, the
callbacks of options that take a moment, writing the output, who acts, and the exit
code a command chose.

``--config`` is the one place the configuration is loaded: a command decorated
with `config_option` receives ``config: Config``, loaded once, as its body starts
(after every option was parsed and checked, as the commands always did).
"""

from __future__ import annotations

import functools
import getpass
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from verifier.errors import BadRequest
from verifier.formats import render
from verifier.moments import parse_moment

if TYPE_CHECKING:
    from verifier.config import Config

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[F], F]

CONFIG_HELP = (
    "Configuration file (default: $VERIFIER_CONFIG, ~/.config/verifier/verifier.toml, "
    "/etc/verifier/verifier.toml)."
)


@dataclass
class Invocation:
    """What the edge (`verifier.cli.run`) needs to know of the command it ran: the output
    format asked for, so that an error is shown in it. Handed down click's contexts as
    their ``obj``."""

    format: str = "text"


def output_format(*choices: str, help: str) -> Decorator[Any]:
    """A ``--format`` option (the first choice is the default), remembered for the edge."""

    def remember(ctx: click.Context, param: click.Parameter, value: str) -> str:
        invocation = ctx.find_object(Invocation)
        if invocation is not None:
            invocation.format = value
        return value

    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=choices[0],
        show_default=True,
        callback=remember,
        help=help,
    )


format_option: Decorator[Any] = output_format(
    "text", "json", help="json prints one object for scripts."
)


def _config_path(help: str) -> Decorator[Any]:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help=help,
    )


def config_option(command: F) -> F:
    """``--config FILE``: the command receives ``config``, the configuration loaded from
    it (or from where it is looked for) once its options are parsed."""

    @functools.wraps(command)
    def with_config(*args: Any, config_path: Path | None, **kwargs: Any) -> Any:
        return command(*args, config=_load(config_path), **kwargs)

    return _config_path(CONFIG_HELP)(with_config)  # type: ignore[no-any-return]


def config_loader_option(help: str = CONFIG_HELP) -> Decorator[Any]:
    """``--config FILE`` for a command that may not need a configuration at all (the gate
    reading a server): it receives ``config``, a function that loads it once, when first
    called."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def with_loader(*args: Any, config_path: Path | None, **kwargs: Any) -> Any:
            loader = functools.cache(functools.partial(_load, config_path))
            return command(*args, config=loader, **kwargs)

        return _config_path(help)(with_loader)  # type: ignore[no-any-return]

    return decorate


def _load(path: Path | None) -> Config:
    """The configuration from `path` (or where it is looked for). `verifier.config` (pydantic,
    its models built) is imported here, when a command reads it: ``--help``, ``trail verify``
    and the gate reading a server never load it."""
    from verifier.config import Config

    return Config.load(path)


def moment(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """The callback of an option that takes a moment (`verifier.moments.parse_moment`),
    a mistake shown as click's usage error."""
    if value is None:
        return None
    try:
        return parse_moment(value, param.opts[0])
    except BadRequest as exc:
        raise click.BadParameter(exc.problem) from None


def given_moment(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """The callback of an option that takes a moment, a mistake raised as the verifier's
    `BadRequest` (``verifier: --since: ...``, exit 2), before the configuration is read."""
    return None if value is None else parse_moment(value, param.opts[0])


def emit(text: str) -> None:
    """Write to stdout; a reader that went away (`| head -1`) ends the output quietly."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()


def stdout_gone() -> None:
    """Point stdout at /dev/null: what is still written (flushed at exit) goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def say(text: str) -> None:
    """A line for the person running the command, on stderr: ``verifier: text``."""
    click.echo(f"verifier: {text}", err=True)


def progress(line: str) -> None:
    """A line of progress on long work, on stderr, dimmed on a terminal."""
    click.echo(click.style(render.progress_line(line), dim=True), err=True)


def actor() -> str:
    """Who acts from this command line, for the admin log: ``cli:<user>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = str(os.getuid())
    return f"cli:{user}"


def exit_with(code: int) -> NoReturn:
    """End the command with `code`, its output written (click's own exit, which
    `verifier.cli.run` returns)."""
    raise click.exceptions.Exit(code)
