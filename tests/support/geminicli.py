"""The real gemini-cli for end-to-end tests: where it is, and a headless run of scripted turns.

`.ci/run` installs the pinned release into ``.tools/gemini-cli`` of the checkout;
``VERIFIER_GEMINI_CLI`` may name another ``gemini`` binary of that release. When
it is missing the tests that need it skip with the reason, except in CI
(``CI`` set), where they fail: CI must never pass without running them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

VERSION = "0.61.0"
CHECKOUT = Path(__file__).resolve().parents[2]
INSTALLED = CHECKOUT / ".tools" / "gemini-cli" / "node_modules" / ".bin" / "gemini"
HOW = (
    f"gemini-cli {VERSION} is not installed: "
    f"npm install --prefix .tools/gemini-cli @google/gemini-cli@{VERSION} "
    "(what .ci/run does), or set VERIFIER_GEMINI_CLI to its gemini binary"
)


def binary() -> Path | None:
    """The `gemini` binary of the pinned release, or None."""
    named = os.environ.get("VERIFIER_GEMINI_CLI")
    candidates = [Path(named)] if named else [INSTALLED]
    if not named and (found := shutil.which("gemini")):
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and version(path) == VERSION:
            return path
    return None


def version(path: Path) -> str | None:
    """The release of the package the binary belongs to (its package.json), or None."""
    package = path.resolve().parents[1] / "package.json"
    try:
        return str(json.loads(package.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def require() -> Path:
    """The binary; a skip with the way to install it, or in CI a failure."""
    path = binary()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(HOW + " (CI: tests that need it fail rather than skip)")
        pytest.skip(HOW)
    return path


def turn(*parts: str | Mapping[str, Any], prompt_tokens: int = 100) -> dict[str, Any]:
    """One scripted model turn: text parts, or function calls given as ``{name: args}``."""
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            content.append({"text": part})
        else:
            for name, args in part.items():
                content.append({"functionCall": {"name": name, "args": dict(args)}})
    response = {
        "candidates": [{"content": {"role": "model", "parts": content}, "finishReason": "STOP"}],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": 10,
            "totalTokenCount": prompt_tokens + 10,
        },
    }
    return {"method": "generateContentStream", "response": [response]}


def run(
    gemini: Path,
    repo: Path,
    home: Path,
    turns: Sequence[Mapping[str, Any]],
    *,
    prompt: str = "Fix the bug.",
    model: str | None = None,
    timeout: float = 240,
    output: str = "json",
    approval: str = "yolo",
) -> subprocess.CompletedProcess[str]:
    """gemini-cli headless in `repo` (its project hooks trusted) with `turns` as the model."""
    home.mkdir(parents=True, exist_ok=True)
    script = home / "turns.jsonl"
    script.write_text("".join(json.dumps(t) + "\n" for t in turns))
    args = [str(gemini), "-p", prompt, "-o", output, "--fake-responses-non-strict", str(script)]
    args += ["--yolo"] if approval == "yolo" else ["--approval-mode", approval]
    if model is not None:
        args += ["-m", model]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GEMINI_API_KEY": "scripted",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "NO_COLOR": "1",
        "GIT_AUTHOR_NAME": "Agent",
        "GIT_AUTHOR_EMAIL": "agent@example.invalid",
        "GIT_COMMITTER_NAME": "Agent",
        "GIT_COMMITTER_EMAIL": "agent@example.invalid",
    }
    return subprocess.run(
        args, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def transcripts(home: Path) -> list[Path]:
    """The transcripts gemini-cli wrote under `home`, oldest first."""
    return sorted((home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))


# Models of each tool family gemini-cli 0.61 tells apart (`getToolFamily`).
LEGACY_MODEL = "gemini-2.5-pro"  # "default-legacy"
GEMINI_3_MODEL = "gemini-3.1-pro-preview"  # "gemini-3", and the default model


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
