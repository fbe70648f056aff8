"""The Makefile's pins agree with the code that names them."""

from __future__ import annotations

import re
from pathlib import Path

from verifier.app.geminicli_hooks import GEMINI_CLI_VERSION

ROOT = Path(__file__).resolve().parents[1]


def test_make_test_installs_the_gemini_cli_release_the_hooks_are_built_for() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    pinned = re.search(r"^GEMINI_CLI_VERSION := (\S+)$", makefile, re.MULTILINE)
    assert pinned is not None, "the Makefile pins no gemini-cli release"
    assert pinned.group(1) == GEMINI_CLI_VERSION
    assert re.search(r"^test: .*\$\(GEMINI_CLI\)", makefile, re.MULTILINE), "make test skips it"
