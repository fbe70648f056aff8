"""The recorder's contract with its harness: order of calls, the witness hook, failing tools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from audit.errors import RecorderError
from audit.jcs import jcs_sha256
from tests.support.gitrepo import GitRepo
from tests.support.recording import call
from tests.support.scripted import recorder, response


def test_the_witness_sees_each_entry_once_it_is_on_disk(repo: GitRepo, tmp_path: Path) -> None:
    trail = tmp_path / "s-1.jsonl"
    on_disk: list[tuple[int, int]] = []

    def witness(entry: Mapping[str, Any]) -> None:
        lines = trail.read_bytes().splitlines()
        on_disk.append((entry["seq"], len(lines)))
        assert json.loads(lines[-1]) == entry

    rec = recorder(repo.path, trail, witness=witness)
    (pending,) = rec.reply(response(call("read_file", "c1", path="calc.py")))
    rec.execute(pending, lambda args: {"output": "..."}, paths=["calc.py"])
    rec.respond()
    report = rec.finish("done")
    assert on_disk == [(0, 1), (1, 2), (2, 3)]
    assert report["extensions"]["recorder"]["witness"] == {"failures": 0, "first_failure": None}


def test_a_witness_out_of_reach_never_stops_the_session_and_the_report_says_so(
    repo: GitRepo, tmp_path: Path
) -> None:
    def witness(entry: Mapping[str, Any]) -> None:
        raise ConnectionRefusedError("witness down")

    rec = recorder(repo.path, tmp_path / "s-1.jsonl", witness=witness)
    report = rec.finish("done")
    assert report["audit"]["count"] == 2
    assert report["extensions"]["recorder"]["witness"] == {
        "failures": 2,
        "first_failure": "entry 0: witness down",
    }


def test_a_tool_that_raises_is_answered_with_its_error_and_recorded(
    repo: GitRepo, tmp_path: Path
) -> None:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    (pending,) = rec.reply(response(call("read_file", "c1", path="nope.py")))

    def boom(args: Any) -> Any:
        raise FileNotFoundError("nope.py")

    answer = rec.execute(pending, boom, paths=["nope.py"])
    assert answer == {"error": "FileNotFoundError: nope.py"}
    content = rec.respond()
    assert content.parts is not None and content.parts[0].function_response is not None
    assert content.parts[0].function_response.response == answer
    entry = rec.finish("error")["audit"]["entries"][1]
    assert entry["result_sha256"] == jcs_sha256(answer)


def test_a_positional_call_id_names_the_content_and_the_part(repo: GitRepo, tmp_path: Path) -> None:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    calls = rec.reply(
        response({"text": "Two reads."}, call("read_file", path="a"), call("read_file", path="b"))
    )
    assert [c.call_id for c in calls] == ["t1.p1", "t1.p2"]


def test_out_of_order_use_is_refused_saying_what_is_expected(repo: GitRepo, tmp_path: Path) -> None:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    (pending,) = rec.reply(response(call("read_file", "c1", path="calc.py")))
    with pytest.raises(RecorderError, match="unanswered"):
        rec.reply(response({"text": "again"}))
    with pytest.raises(RecorderError, match="not answered yet: c1"):
        rec.respond()
    with pytest.raises(RecorderError, match="expected one of deny, refused"):
        rec.deny(pending, {"error": "no"}, decision="allow")
    rec.deny(pending, {"error": "no"})
    with pytest.raises(RecorderError, match="not waiting"):
        rec.deny(pending, {"error": "no"})
    rec.respond()
    rec.finish("done")
    with pytest.raises(RecorderError, match="finished"):
        rec.reply(response({"text": "late"}))


def test_a_bad_session_id_is_refused_naming_the_field(repo: GitRepo, tmp_path: Path) -> None:
    with pytest.raises(RecorderError) as info:
        recorder(repo.path, tmp_path / "s.jsonl", session_id="has space")
    assert info.value.field == "session_id"
    assert not (tmp_path / "s.jsonl").exists()
