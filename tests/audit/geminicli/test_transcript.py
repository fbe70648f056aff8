"""`audit.geminicli.transcript`: gemini-cli's transcript read as gemini-cli reads it, or refused
naming the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.errors import TranscriptError
from audit.geminicli import parse_transcript, read_transcript
from tests.support import geminicli
from tests.support.gitrepo import GitRepo

HEADER = {"sessionId": "s-1", "projectHash": "p" * 64, "startTime": "2026-12-03T10:00:00.000Z"}


def lines(*records: Any) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def user(mid: str, text: str) -> dict[str, Any]:
    return {
        "id": mid,
        "type": "user",
        "timestamp": "2026-12-03T10:00:01.000Z",
        "content": [{"text": text}],
    }


def gemini(mid: str, text: str = "", calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": mid,
        "type": "gemini",
        "content": text,
        "model": "gemini-2.5-pro",
    }
    if calls is not None:
        record["toolCalls"] = calls
    return record


def tool_call(cid: str, name: str = "read_file", **args: Any) -> dict[str, Any]:
    response = {"functionResponse": {"id": cid, "name": name, "response": {"output": "ok"}}}
    return {"id": cid, "name": name, "args": args, "status": "success", "result": [response]}


def test_a_real_session_reads_as_the_model_saw_it(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit({"calc.py": "def add(a, b):\n    return a - b\n"})
    fix = {
        "file_path": "calc.py",
        "old_string": "return a - b",
        "new_string": "return a + b",
        "instruction": "fix add",
    }
    ran = geminicli.session(
        repo.path,
        tmp_path / "home",
        [geminicli.turn({"replace": fix}), geminicli.turn("Fixed.")],
        prompt="fix add",
        model=geminicli.LEGACY_MODEL,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.transcript is not None
    transcript = read_transcript(ran.transcript)
    assert transcript.task == "fix add"
    assert transcript.models == [geminicli.LEGACY_MODEL]
    [call] = transcript.tool_calls
    assert call.name == "replace" and call.status == "success"
    edit = call.edit
    assert edit is not None and Path(edit.file_path) == (repo.path / "calc.py").resolve()
    assert (edit.original, edit.new) == (
        "def add(a, b):\n    return a - b\n",
        "def add(a, b):\n    return a + b\n",
    )
    roles = [(c["role"], next(iter(c["parts"][0]))) for c in transcript.contents()]
    # The model turn before its calls ran is written again with them: read once.
    assert roles == [
        ("user", "text"),
        ("model", "functionCall"),
        ("user", "functionResponse"),
        ("model", "text"),
    ]
    assert transcript.contents()[1]["parts"][0]["functionCall"]["id"] == call.id
    assert transcript.raw == ran.transcript.read_bytes()


def test_a_record_written_again_replaces_the_first_in_its_place() -> None:
    raw = lines(
        HEADER,
        user("u1", "task"),
        gemini("g1"),
        gemini("g1", calls=[tool_call("c1", file_path="a.py")]),
        gemini("g2", "done"),
    )
    t = parse_transcript(raw)
    assert [m.id for m in t.messages] == ["u1", "g1", "g2"]
    assert [c.id for c in t.tool_calls] == ["c1"]
    assert t.last is not None and t.last.text == "done"


def test_a_rewind_drops_the_messages_from_its_target_on() -> None:
    raw = lines(
        HEADER,
        user("u1", "first"),
        gemini("g1", "a"),
        user("u2", "again"),
        {"$rewindTo": "g1"},
        gemini("g3", "b"),
    )
    assert [m.id for m in parse_transcript(raw).messages] == ["u1", "g3"]


def test_a_set_of_messages_replaces_every_message_read_so_far() -> None:
    raw = lines(
        HEADER,
        user("u0", "old"),
        {"$set": {"messages": [user("u1", "new")], "lastUpdated": "2026-12-03T10:00:09.000Z"}},
    )
    t = parse_transcript(raw)
    assert [m.id for m in t.messages] == ["u1"] and t.last_updated == "2026-12-03T10:00:09.000Z"


def test_the_session_context_and_repeated_responses_stay_out_of_the_history() -> None:
    raw = lines(
        HEADER,
        user("u0", "<session_context>\nthe tree</session_context>"),
        user("u1", "task"),
        gemini("g1", calls=[tool_call("c1", file_path="a.py")]),
        {"id": "u2", "type": "user", "content": tool_call("c1")["result"]},
        {"id": "i1", "type": "info", "content": "a note for the person"},
        gemini("g2", "done"),
    )
    contents = parse_transcript(raw).contents()
    assert [c["role"] for c in contents] == ["user", "model", "user", "model"]
    assert contents[0]["parts"] == [{"text": "task"}]
    assert sum("functionResponse" in p for c in contents for p in c["parts"]) == 1


def test_a_last_line_cut_short_is_taken_as_cut_not_refused() -> None:
    raw = lines(HEADER, user("u1", "task")) + b'{"id": "g1", "type": "gem'
    t = parse_transcript(raw)
    assert t.truncated and [m.id for m in t.messages] == ["u1"]


@pytest.mark.parametrize(
    ("record", "line", "field", "problem"),
    [
        (b"not json", 2, None, "not a JSON line"),
        (b"[1, 2]", 2, None, "expected a JSON object, got an array"),
        (json.dumps({"id": "m", "type": "robot"}).encode(), 2, "type", "expected one of"),
        (json.dumps({"id": 7, "type": "user"}).encode(), 2, "id", "non-empty string"),
        (
            json.dumps(gemini("g", calls=[{"id": "c", "name": "x", "args": [1]}])).encode(),
            2,
            "toolCalls.0.args",
            "expected an object",
        ),
        (
            json.dumps(gemini("g", calls=[{"id": "c", "args": {}}])).encode(),
            2,
            "toolCalls.0.name",
            "non-empty string",
        ),
        (
            json.dumps({"id": "u", "type": "user", "toolCalls": [tool_call("c")]}).encode(),
            2,
            "toolCalls",
            "only the model calls tools",
        ),
        (
            json.dumps(
                {"$set": {"messages": [{"id": "m", "type": "user", "content": 5}]}}
            ).encode(),
            2,
            "$set.messages.0.content",
            "expected a string, a part",
        ),
        (json.dumps({"$rewindTo": 3}).encode(), 2, "$rewindTo", "expected a message id"),
        (json.dumps({"something": "else"}).encode(), 2, None, "neither a header"),
        (b'{"id": "u", "type": "user", "content": NaN}', 2, None, "NaN is not a JSON value"),
    ],
)
def test_a_line_that_is_not_a_transcript_record_is_refused_naming_line_and_field(
    record: bytes, line: int, field: str | None, problem: str
) -> None:
    raw = lines(HEADER) + record + b"\n" + lines(gemini("g9", "done"))
    with pytest.raises(TranscriptError, match=problem) as caught:
        parse_transcript(raw)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert f"line {line}" in str(caught.value)


def test_a_file_without_a_header_is_not_a_transcript(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="not a gemini-cli transcript") as caught:
        parse_transcript(lines(user("u1", "task")))
    assert caught.value.field == "sessionId"
    with pytest.raises(TranscriptError, match="cannot read"):
        read_transcript(tmp_path / "absent.jsonl")
