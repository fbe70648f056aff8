"""gemini-cli, Google's agent loop, as the audit package reads it.

`transcript` reads the transcript gemini-cli writes for every session
(`read_transcript`): the messages, the tool calls with their results, and the
history the model saw, with no import of the verifier.
"""

from __future__ import annotations

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
