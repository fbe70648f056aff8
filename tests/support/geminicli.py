"""The real gemini-cli for end-to-end tests: where it is, and a headless run of scripted turns.

`make test` (and so `.ci/run`) installs the pinned release into ``.tools/gemini-cli``
of the checkout; ``VERIFIER_GEMINI_CLI`` may name another ``gemini`` binary of that release
(`verifier.app.geminicli_hooks.find_gemini_cli` looks). When it is missing the
tests that need it skip with the reason, except in CI (``CI`` set), where they
fail: CI must never pass without running them. The scripted run and its turns are
the demo's (`verifier.demo.geminicli`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from verifier.app.geminicli_hooks import GEMINI_CLI_VERSION, find_gemini_cli
from verifier.demo.geminicli import run_scripted as run
from verifier.demo.geminicli import turn

__all__ = [
    "GEMINI_3_MODEL",
    "LEGACY_MODEL",
    "Session",
    "require",
    "run",
    "session",
    "transcripts",
    "turn",
]

CHECKOUT = Path(__file__).resolve().parents[2]
HOW = (
    f"gemini-cli {GEMINI_CLI_VERSION} is not installed: "
    f"npm install --prefix .tools/gemini-cli @google/gemini-cli@{GEMINI_CLI_VERSION} "
    "(what .ci/run does), or set VERIFIER_GEMINI_CLI to its gemini binary"
)

# Models of each tool family gemini-cli 0.61 tells apart (`getToolFamily`).
LEGACY_MODEL = "gemini-2.5-pro"  # "default-legacy"
GEMINI_3_MODEL = "gemini-3.1-pro-preview"  # "gemini-3", and the default model


def require() -> Path:
    """The binary; a skip with the way to install it, or in CI a failure."""
    path = find_gemini_cli(folder=CHECKOUT)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(HOW + " (CI: tests that need it fail rather than skip)")
        pytest.skip(HOW)
    return path


def transcripts(home: Path) -> list[Path]:
    """The transcripts gemini-cli wrote under `home`, oldest first."""
    return sorted((home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))


@dataclass(frozen=True)
class Session:
    """What one run left: its exit code and output, and the transcript it wrote."""

    returncode: int
    stdout: str
    stderr: str
    transcript: Path | None


def session(repo: Path, home: Path, turns: Sequence[Mapping[str, Any]], **options: Any) -> Session:
    """`run` the pinned gemini-cli (`require`: skipped, or failed in CI, without it) and
    find the transcript it wrote."""
    done = run(require(), repo, home, turns, **options)
    found = transcripts(home)
    return Session(done.returncode, done.stdout, done.stderr, found[-1] if found else None)
