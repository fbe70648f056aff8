"""The gemini-cli release the transcript reader, the hook and the import are built for.

One place for what both the hook (inside a session, importing nothing of the
verifier) and `verifier gemini-cli import` name: the agent, the release, and the
tool profile of a model, by gemini-cli's own family rule.
"""

from __future__ import annotations

import re

__all__ = ["AGENT_NAME", "RELEASE", "tool_profile"]

AGENT_NAME = "gemini-cli"
RELEASE = "0.61"
# gemini-cli's `isGemini3Model` on a resolved model id: its tool declarations differ by
# model family (`getToolFamily`).
_GEMINI_3 = re.compile(r"^gemini-3(\.|-|$)")


def tool_profile(model: str | None) -> str:
    """The tool profile of the declarations gemini-cli 0.61 gives `model`."""
    family = "gemini-3" if model and _GEMINI_3.match(model.strip()) else "legacy"
    return f"gemini-cli-{RELEASE}-{family}"
