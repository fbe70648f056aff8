"""`python -m verifier.contract`: the schema `make schema` commits."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.paths import ROOT
from verifier.contract.report import schema_text


def test_the_command_prints_the_schema_as_utf8_whatever_the_locale() -> None:
    """The descriptions are not ASCII; the file is UTF-8 even where stdout's encoding is not."""
    env = {**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": "ascii", "PYTHONUTF8": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "verifier.contract"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert done.stdout == schema_text().encode("utf-8")
    assert "terminé".encode() in done.stdout
