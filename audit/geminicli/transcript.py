"""A gemini-cli transcript (``~/.gemini/tmp/<project>/chats/session-*.jsonl``), read.

gemini-cli 0.61 writes one JSON object per line (`ChatRecordingService`):

* a header, ``{"sessionId", "projectHash", "startTime", "lastUpdated", "kind"}``;
* message records, ``{"id", "timestamp", "type", "content", ...}``: ``type`` is
  ``user``, ``gemini``, ``info``, ``warning`` or ``error``; a ``gemini`` record
  carries ``model``, ``tokens``, ``thoughts`` and its ``toolCalls`` (``id``,
  ``name``, ``args``, ``result``: the ``functionResponse`` parts sent back,
  ``status``, ``resultDisplay``: for an edit ``filePath``, ``originalContent``,
  ``newContent``, ``isNewFile``);
* ``{"$set": {...}}`` updates of the header; a ``$set`` of ``messages`` replaces
  every message read so far;
* ``{"$rewindTo": ID}``: the messages from ``ID`` on are dropped (``/rewind``).

A record written again under the same ``id`` replaces the first one in its
place (a model turn is written before its tool calls run, then with them).
That is how gemini-cli itself loads a transcript (`loadConversationRecord`),
except that gemini-cli skips a line it cannot parse and this reader refuses
it, naming the line; only a last line without its newline (the process killed
while writing it) is taken as cut short (`Transcript.truncated`).

`Transcript.contents` rebuilds the history the model saw the way gemini-cli
does on resume (`convertSessionToClientHistory`), as google-genai `Content`
objects in the REST form: a model turn (thoughts, text, one ``functionCall``
per tool call) followed by a user turn of the calls' ``functionResponse``
parts. A user record that only repeats those responses is not repeated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.errors import TranscriptError

__all__ = [
    "FileEdit",
    "Message",
    "ToolCallRecord",
    "Transcript",
    "parse_transcript",
    "read_transcript",
    "subagent_paths",
]

MESSAGE_TYPES = ("user", "gemini", "info", "warning", "error")
# The user contents gemini-cli leaves out of the history it rebuilds (`isIgnoredUserContent`).
IGNORED_USER_PREFIXES = ("/", "?", "<session_context>", "<hook_context>")


@dataclass(frozen=True)
class FileEdit:
    """What an edit tool's ``resultDisplay`` says it did to one file."""

    file_path: str
    original: str | None
    new: str
    is_new_file: bool


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of a gemini record, as gemini-cli ran it."""

    id: str
    name: str
    args: Mapping[str, Any]
    status: str | None
    result: tuple[Mapping[str, Any], ...]
    result_display: Any
    line: int

    @property
    def response_parts(self) -> list[dict[str, Any]]:
        """The parts sent back to the model (a string result is ``{"output": ...}``)."""
        return [dict(part) for part in self.result]

    @property
    def edit(self) -> FileEdit | None:
        """The file this call wrote, when its display says so (``replace``, ``write_file``)."""
        display = self.result_display
        if self.status != "success" or not isinstance(display, Mapping):
            return None
        path, new = display.get("filePath"), display.get("newContent")
        if not isinstance(path, str) or not isinstance(new, str):
            return None
        original = display.get("originalContent")
        return FileEdit(
            path,
            original if isinstance(original, str) else None,
            new,
            display.get("isNewFile") is True,
        )


@dataclass(frozen=True)
class Message:
    """One message record, the last one written under its id."""

    id: str
    type: str
    timestamp: str | None
    parts: tuple[Mapping[str, Any], ...]
    model: str | None
    tokens: Mapping[str, Any]
    thoughts: tuple[Mapping[str, Any], ...]
    tool_calls: tuple[ToolCallRecord, ...]
    line: int

    @property
    def text(self) -> str:
        return "".join(p["text"] for p in self.parts if isinstance(p.get("text"), str))

    @property
    def only_responses(self) -> bool:
        """A user record holding function responses alone (they repeat the calls' results)."""
        return bool(self.parts) and all("functionResponse" in p for p in self.parts)

    @property
    def ignored(self) -> bool:
        """Left out of the history as gemini-cli rebuilds it."""
        if self.type in ("info", "warning", "error"):
            return True
        if self.type == "user":
            if self.only_responses:
                return True
            text = self.text.strip()
            if any(set(p) - {"text"} for p in self.parts):
                return False
            return not text or text.startswith(IGNORED_USER_PREFIXES)
        return False


@dataclass(frozen=True)
class Transcript:
    """A transcript read whole: its header, its messages in order, and its raw bytes."""

    session_id: str
    project_hash: str
    start_time: str | None
    last_updated: str | None
    kind: str | None
    messages: tuple[Message, ...]
    raw: bytes = field(repr=False)
    truncated: bool = False

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [c for m in self.messages for c in m.tool_calls]

    @property
    def models(self) -> list[str]:
        """The models of the gemini records, in order of first use."""
        return list(dict.fromkeys(m.model for m in self.messages if m.model))

    @property
    def task(self) -> str | None:
        """The first user text that is not ignored: the prompt."""
        for m in self.messages:
            if m.type == "user" and not m.ignored and m.text.strip():
                return m.text
        return None

    @property
    def last(self) -> Message | None:
        """The last user or gemini record."""
        for m in reversed(self.messages):
            if m.type in ("user", "gemini"):
                return m
        return None

    def contents(self) -> list[dict[str, Any]]:
        """The history as google-genai ``Content`` objects in the REST form."""
        contents: list[dict[str, Any]] = []
        for m in self.messages:
            if m.ignored:
                continue
            if m.type == "user":
                contents.append({"role": "user", "parts": [dict(p) for p in m.parts]})
                continue
            parts: list[dict[str, Any]] = []
            if any("functionCall" in p or p.get("thought") for p in m.parts):
                parts = [dict(p) for p in m.parts]
            else:
                for t in m.thoughts:
                    subject, description = t.get("subject"), t.get("description", "")
                    text = f"**{subject}** {description}" if subject else str(description)
                    parts.append({"text": text, "thought": True})
                parts += [dict(p) for p in m.parts]
                parts += [
                    {"functionCall": {"id": c.id, "name": c.name, "args": dict(c.args)}}
                    for c in m.tool_calls
                ]
            if not parts:
                continue
            contents.append({"role": "model", "parts": parts})
            responses = [p for c in m.tool_calls for p in c.response_parts]
            if responses:
                contents.append({"role": "user", "parts": responses})
        return contents


def subagent_paths(path: Path, session_id: str) -> list[Path]:
    """The transcripts of the sub-agents the session of `path` ran, by name: gemini-cli 0.61
    writes each beside the session's, ``chats/<session id>/<sub-agent id>.jsonl`` (header
    ``kind: "subagent"``), a sub-agent's own sub-agents in the same folder."""
    return sorted((path.parent / session_id).glob("*.jsonl"))


def read_transcript(path: Path) -> Transcript:
    """Read the transcript at `path`; `TranscriptError` when it cannot be read as one."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    return parse_transcript(raw)


def parse_transcript(raw: bytes) -> Transcript:
    """Read a transcript's bytes; `TranscriptError` names the line and field at fault."""
    lines = raw.split(b"\n")
    truncated = False
    header: dict[str, Any] = {}
    messages: dict[str, Message] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError) as exc:
            if n == len(lines):  # no newline after it: the writer was stopped mid-line
                truncated = True
                break
            raise TranscriptError(f"not a JSON line: {exc}", n) from None
        if not isinstance(record, dict):
            raise TranscriptError(f"expected a JSON object, got {_type(record)}", n)
        if "$rewindTo" in record:
            target = record["$rewindTo"]
            if not isinstance(target, str):
                raise TranscriptError(f"expected a message id, got {_type(target)}", n, "$rewindTo")
            _rewind(messages, target)
        elif "id" in record:
            message = _message(record, n, "")
            messages[message.id] = message  # a record written again stays in its place
        elif "$set" in record:
            update = record["$set"]
            if not isinstance(update, dict):
                raise TranscriptError(f"expected an object, got {_type(update)}", n, "$set")
            if "messages" in update:
                listed = update["messages"]
                if not isinstance(listed, list):
                    raise TranscriptError(
                        f"expected an array, got {_type(listed)}", n, "$set.messages"
                    )
                messages.clear()
                for i, item in enumerate(listed):
                    if not isinstance(item, dict):
                        raise TranscriptError(
                            f"expected an object, got {_type(item)}", n, f"$set.messages.{i}"
                        )
                    message = _message(item, n, f"$set.messages.{i}.")
                    messages[message.id] = message
            header.update({k: v for k, v in update.items() if k != "messages"})
        elif "sessionId" in record:
            header.update(record)
        else:
            raise TranscriptError(
                "neither a header (sessionId), a message (id), an update ($set) nor a "
                f"rewind ($rewindTo); keys {sorted(record)[:6]}",
                n,
            )
    for key in ("sessionId", "projectHash"):
        if not isinstance(header.get(key), str) or not header[key]:
            raise TranscriptError("missing from the header: not a gemini-cli transcript", 1, key)
    return Transcript(
        header["sessionId"],
        header["projectHash"],
        _optional_str(header.get("startTime")),
        _optional_str(header.get("lastUpdated")),
        _optional_str(header.get("kind")),
        tuple(messages.values()),
        raw,
        truncated,
    )


def _rewind(messages: dict[str, Message], target: str) -> None:
    """Drop the messages from `target` on; all of them when it is not there (as gemini-cli)."""
    ids = list(messages)
    cut = ids.index(target) if target in ids else 0
    for key in ids[cut:]:
        del messages[key]


def _message(record: Mapping[str, Any], n: int, where: str) -> Message:
    def fail(problem: str, key: str) -> TranscriptError:
        return TranscriptError(problem, n, where + key)

    mid, mtype = record.get("id"), record.get("type")
    if not isinstance(mid, str) or not mid:
        raise fail(f"expected a non-empty string, got {_type(mid)}", "id")
    if mtype not in MESSAGE_TYPES:
        raise fail(f"expected one of {list(MESSAGE_TYPES)}, got {mtype!r}", "type")
    content = record.get("content", [])
    parts = _parts(content)
    if parts is None:
        raise fail(
            f"expected a string, a part or an array of parts, got {_type(content)}", "content"
        )
    model = record.get("model")
    if model is not None and not isinstance(model, str):
        raise fail(f"expected a string, got {_type(model)}", "model")
    tokens = record.get("tokens") or {}
    if not isinstance(tokens, dict):
        raise fail(f"expected an object, got {_type(tokens)}", "tokens")
    thoughts = record.get("thoughts") or []
    if not isinstance(thoughts, list) or not all(isinstance(t, dict) for t in thoughts):
        raise fail("expected an array of objects", "thoughts")
    calls = record.get("toolCalls") or []
    if not isinstance(calls, list):
        raise fail(f"expected an array, got {_type(calls)}", "toolCalls")
    if calls and mtype != "gemini":
        raise fail(f"tool calls in a {mtype!r} record (only the model calls tools)", "toolCalls")
    return Message(
        mid,
        mtype,
        _optional_str(record.get("timestamp")),
        tuple(parts),
        model,
        tokens,
        tuple(thoughts),
        tuple(_call(c, n, f"{where}toolCalls.{i}.") for i, c in enumerate(calls)),
        n,
    )


def _call(record: Any, n: int, where: str) -> ToolCallRecord:
    if not isinstance(record, dict):
        raise TranscriptError(f"expected an object, got {_type(record)}", n, where.rstrip("."))
    cid, name, args = record.get("id"), record.get("name"), record.get("args", {})
    if not isinstance(cid, str) or not cid:
        raise TranscriptError(f"expected a non-empty string, got {_type(cid)}", n, where + "id")
    if not isinstance(name, str) or not name:
        raise TranscriptError(f"expected a non-empty string, got {_type(name)}", n, where + "name")
    if not isinstance(args, dict):
        raise TranscriptError(f"expected an object, got {_type(args)}", n, where + "args")
    status = record.get("status")
    if status is not None and not isinstance(status, str):
        raise TranscriptError(f"expected a string, got {_type(status)}", n, where + "status")
    result = record.get("result")
    parts: list[dict[str, Any]]
    if result is None:
        parts = []
    elif isinstance(result, str):  # as gemini-cli reads an old transcript's string result
        parts = [{"functionResponse": {"id": cid, "name": name, "response": {"output": result}}}]
    elif isinstance(result, list) and all(isinstance(p, dict) for p in result):
        parts = [dict(p) for p in result]
    elif isinstance(result, dict):
        parts = [dict(result)]
    else:
        raise TranscriptError(
            f"expected the function response parts, got {_type(result)}", n, where + "result"
        )
    return ToolCallRecord(cid, name, args, status, tuple(parts), record.get("resultDisplay"), n)


def _parts(content: Any) -> list[dict[str, Any]] | None:
    """gemini-cli's `ensurePartArray`: a string, a part or a list of both, as parts."""
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if isinstance(content, dict):
        return [content]
    if isinstance(content, Sequence):
        parts = []
        for item in content:
            if isinstance(item, str):
                parts.append({"text": item})
            elif isinstance(item, dict):
                parts.append(item)
            else:
                return None
        return parts
    return None


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _type(value: Any) -> str:
    names = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
    }
    if value is None:
        return "null"
    return names.get(type(value), f"a {type(value).__name__}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")
