"""gemini-cli, Google's agent loop, as the audit package reads it.

`transcript` reads the transcript gemini-cli writes for every session
(`read_transcript`): the messages, the tool calls with their results, and the
history the model saw, with no import of the verifier. `release` names the
release these are built for and a model's tool profile; `hook` is the hook
gemini-cli runs for each event.

The names below are loaded when first used (PEP 562): gemini-cli starts the hook
(`python -m audit.geminicli.hook`) for every tool call, and a tool event never
needs the transcript reader.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from audit.geminicli.transcript import (
        FileEdit,
        Message,
        ToolCallRecord,
        Transcript,
        parse_transcript,
        read_transcript,
    )

__all__ = [
    "FileEdit",
    "Message",
    "ToolCallRecord",
    "Transcript",
    "parse_transcript",
    "read_transcript",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("audit.geminicli.transcript"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
