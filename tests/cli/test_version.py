"""The example ``verifier version`` command."""

from __future__ import annotations

import json

from click.testing import CliRunner

from verifier import __version__
from verifier.cli.version import version_command


def test_version_prints_the_version_in_text_and_json() -> None:
    runner = CliRunner()
    assert runner.invoke(version_command, []).output == f"{__version__}\n"
    out = runner.invoke(version_command, ["--format", "json"]).output
    assert json.loads(out) == {"version": __version__}
