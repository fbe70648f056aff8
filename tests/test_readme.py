"""The README's commands and help text match the code."""

from __future__ import annotations

import re

from click.testing import CliRunner

from tests.support.paths import ROOT
from verifier.cli import main


def help_block() -> str:
    runner = CliRunner()
    parts = []
    for args in (["--help"], ["verify", "--help"]):
        result = runner.invoke(main, args, terminal_width=100, prog_name="verifier")
        assert result.exit_code == 0
        parts.append(f"$ verifier {' '.join(args)}\n{result.output}")
    return "\n".join(parts)


def test_cli_help_in_readme_matches_the_code() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- cli-help:start -->\n```\n(.*?)```\n<!-- cli-help:end -->", text, re.S)
    assert block is not None
    assert block.group(1) == help_block(), "update the cli-help block of README.md"


def test_readme_gives_the_two_commands_and_ci_runs_make_test() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci and "VERIFIER_TEST_POSTGRES_URL" in ci
