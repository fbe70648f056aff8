"""Every command-line option that takes a moment reads it with the one parser
(`verifier.moments.parse_moment`): a date is its midnight UTC, a date and time needs its
offset (``Z`` or ``+HH:MM``), and a mistake names the option. Found by walking the
commands, so an option added later is held to the same forms."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import click
import pytest

from verifier.cli import COMMANDS
from verifier.errors import BadRequest

# Options that name a moment by what they are: each must be found below.
KNOWN = {
    "evidence export --since",
    "evidence export --until",
    "export sessions --from",
    "export sessions --to",
    "prune --before",
    "token create --expires",
}
MOMENT_NAMES = {"--since", "--until", "--from", "--to", "--before", "--expires", "--after"}
# Options of those names that are not moments.
NOT_MOMENTS = {"db copy --to"}  # the PostgreSQL database to copy into


def _commands() -> Iterator[tuple[str, click.Command]]:
    for name, info in COMMANDS.items():
        command = getattr(importlib.import_module(info.module), info.attribute)
        yield from _walk(name, command)


def _walk(path: str, command: click.Command) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for sub, child in command.commands.items():
            yield from _walk(f"{path} {sub}", child)


def moment_options() -> list[tuple[str, click.Command, click.Option]]:
    found = []
    for path, command in _commands():
        for param in command.params:
            name = f"{path} {param.opts[0]}"
            if (
                isinstance(param, click.Option)
                and (set(param.opts) & MOMENT_NAMES or param.metavar in ("DATE", "TIME"))
                and name not in NOT_MOMENTS
            ):
                found.append((name, command, param))
    return found


OPTIONS = moment_options()


def test_every_known_moment_option_is_found() -> None:
    assert {name for name, _, _ in OPTIONS} >= KNOWN


def _read(command: click.Command, option: click.Option, value: str) -> datetime:
    """What the option's callback makes of `value`: a moment (a prune's cutoff carries one)."""
    assert option.callback is not None, f"{option.opts[0]} takes its text unparsed"
    with click.Context(command) as ctx:
        got = option.callback(ctx, option, value)
    moment = getattr(got, "moment", got)
    assert isinstance(moment, datetime), got
    return moment


def _day(option: click.Option) -> datetime:
    # An expiry must lie ahead, a prune's cutoff behind: a date each accepts.
    ahead = option.opts[0] == "--expires"
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(
        days=400 if ahead else -400
    )


@pytest.mark.parametrize(("name", "command", "option"), OPTIONS, ids=[n for n, _, _ in OPTIONS])
def test_a_moment_option_takes_a_date_and_a_time_with_its_offset(
    name: str, command: click.Command, option: click.Option
) -> None:
    day = _day(option)
    date_text = day.date().isoformat()
    assert _read(command, option, date_text) == day
    assert _read(command, option, f"{date_text}T10:30:00Z") == day + timedelta(hours=10, minutes=30)
    assert _read(command, option, f"{date_text}T12:30:00+02:00") == day + timedelta(
        hours=10, minutes=30
    )


@pytest.mark.parametrize(("name", "command", "option"), OPTIONS, ids=[n for n, _, _ in OPTIONS])
@pytest.mark.parametrize(
    ("typed", "problem"),
    [("2026-11-29T10:00:00", "has no UTC offset"), ("next tuesday", "is not a date or an ISO")],
)
def test_a_moment_option_refuses_a_time_without_offset_naming_the_problem(
    name: str, command: click.Command, option: click.Option, typed: str, problem: str
) -> None:
    with pytest.raises((click.BadParameter, BadRequest)) as raised:
        _read(command, option, typed)
    error = raised.value
    if isinstance(error, BadRequest):
        assert error.field == option.opts[0]
        text = error.problem
    else:
        text = error.message
    assert problem in text, text
