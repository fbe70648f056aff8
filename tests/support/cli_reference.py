"""The `--help` of every command, as `docs/cli.md` reproduces it between its markers.

`python -m tests.support.cli_reference` rewrites the block in `docs/cli.md`
(`make docs`); `tests/test_docs.py` fails when the page and the code disagree,
so the reference a reader trusts is the one the code prints.
"""

from __future__ import annotations

import re
import sys

import click
from click.testing import CliRunner

from tests.support.paths import ROOT
from verifier.cli import COMMANDS, load_command, main

PAGE = ROOT / "docs" / "cli.md"
START, END = "<!-- cli-help:start -->\n```\n", "```\n<!-- cli-help:end -->"
BLOCK = re.compile(re.escape(START) + r"(.*?)" + re.escape(END), re.S)


def _paths() -> list[list[str]]:
    """Every command line whose help is shown: the root, each command, each subcommand."""
    paths: list[list[str]] = [[]]
    for name in sorted(COMMANDS):
        paths.append([name])
        command = load_command(name)
        if isinstance(command, click.Group):
            paths.extend([name, sub] for sub in sorted(command.commands))
    return paths


def help_block() -> str:
    """The help texts, each under the command line that prints it."""
    runner = CliRunner()
    parts = []
    for path in _paths():
        args = [*path, "--help"]
        result = runner.invoke(main, args, terminal_width=100, prog_name="verifier")
        assert result.exit_code == 0, (args, result.output)
        parts.append(f"$ verifier {' '.join(args)}\n{result.output}")
    return "\n".join(parts)


def page_block(text: str) -> str | None:
    """The help block of the page as it stands, or None when its markers are gone."""
    match = BLOCK.search(text)
    return None if match is None else match.group(1)


def regenerate() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert page_block(text) is not None, f"{PAGE} lost its cli-help markers"
    PAGE.write_text(BLOCK.sub(lambda _: START + help_block() + END, text), encoding="utf-8")


if __name__ == "__main__":
    regenerate()
    sys.exit(0)
