"""A harness written against the recorder: its reports are accepted by the verifier as they are."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from audit.errors import RecorderError
from audit.recorder import claims_from_effects, dumps
from tests.support.gitrepo import GitRepo, sha256
from tests.support.recording import (
    FIX_CALC,
    FIXED,
    call,
    config,
    delivered,
    findings,
    fix,
    record,
    verdict,
)
from tests.support.scripted import ScriptedClient, load_turns, recorder, response, run_session
from tests.support.sessions import CALC
from verifier.app.pipeline import verify_report
from verifier.findings import DeliveryStatus
from verifier.store import Store


def test_a_recorded_session_that_fixes_the_code_is_delivered_and_stored_byte_for_byte(
    repo: GitRepo, tmp_path: Path
) -> None:
    report, trail = record(repo, tmp_path, load_turns(FIX_CALC))
    raw = dumps(report)
    result = verify_report(raw, config(repo, tmp_path))
    assert result.verification.delivery_status is DeliveryStatus.DELIVERED, findings(
        result.verification
    )
    with Store.open(config(repo, tmp_path).database_url) as store:
        assert store.report_bytes("s-1") == raw
    assert json.loads(raw) == report
    assert dumps(json.loads(raw)) == raw
    assert report["changes"] == [
        {
            "path": "calc.py",
            "action": "modify",
            "sha256_before": sha256(CALC.encode()),
            "sha256_after": sha256(FIXED.encode()),
        }
    ]
    # The trail file is the report's entries, one JCS line each.
    lines = trail.read_bytes().splitlines()
    assert [json.loads(line) for line in lines] == report["audit"]["entries"]


def test_thought_signatures_reach_the_report_as_the_api_sent_them(
    repo: GitRepo, tmp_path: Path
) -> None:
    report, _ = record(repo, tmp_path, load_turns(FIX_CALC))
    sent = json.loads(FIX_CALC.read_text())[0]["candidates"][0]["content"]["parts"]
    kept = report["trajectory"]["contents"][1]["parts"]

    def raw(sig: str) -> bytes:
        return base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))

    assert [raw(p["thought_signature"]) for p in kept] == [
        raw(sent[0]["thoughtSignature"]),
        raw(sent[1]["thoughtSignature"]),
    ]


def test_usage_counts_thought_tokens_as_output_tokens(repo: GitRepo, tmp_path: Path) -> None:
    report, _ = record(repo, tmp_path, load_turns(FIX_CALC))
    assert report["usage"] == {
        "turns": 4,
        "tool_calls": 3,
        "prompt_tokens": 120 + 260 + 300 + 400,
        "output_tokens": (15 + 30 + 12 + 6) + (40 + 25 + 5),
        "thoughts_tokens": 40 + 25 + 5,
        "cached_tokens": 100,
    }


def test_a_command_that_edits_files_has_exact_effects_and_a_file_changed_twice_is_one_claim(
    repo: GitRepo, tmp_path: Path
) -> None:
    script = "import pathlib; p = pathlib.Path('calc.py'); p.write_text(p.read_text() + '# ok\\n')"
    edit = f'python -c "{script}"'
    replies = [
        response(
            call(
                "replace_lines",
                "c1",
                path="calc.py",
                start_line=6,
                end_line=6,
                expected="    return a + b\n",
                replacement="    return a - b\n",
            )
        ),
        response(call("run_command", "c2", command=edit)),
        response({"text": "Done."}),
    ]
    report, _ = record(repo, tmp_path, replies)
    entries = report["audit"]["entries"]
    command_effects = entries[2]["effects"]
    assert [e["path"] for e in command_effects] == ["calc.py"]
    assert command_effects[0]["sha256_before"] == sha256(FIXED.encode())
    assert command_effects[0]["sha256_after"] == sha256((FIXED + "# ok\n").encode())
    assert report["changes"] == [
        {
            "path": "calc.py",
            "action": "modify",
            "sha256_before": sha256(CALC.encode()),
            "sha256_after": sha256((FIXED + "# ok\n").encode()),
        }
    ]
    delivered(dumps(report), repo, tmp_path)


def test_a_file_created_then_deleted_is_no_claim_and_the_report_holds(
    repo: GitRepo, tmp_path: Path
) -> None:
    replies = [
        response(call("write_file", "c1", path="scratch.txt", content="tmp\n")),
        response(call("delete_file", "c2", path="scratch.txt")),
        response({"text": "Nothing to do."}),
    ]
    report, _ = record(repo, tmp_path, replies)
    effects = [e for entry in report["audit"]["entries"] for e in entry.get("effects", [])]
    assert [
        (e["path"], e["sha256_before"] is None, e["sha256_after"] is None) for e in effects
    ] == [
        ("scratch.txt", True, False),
        ("scratch.txt", False, True),
    ]
    assert report["changes"] == []
    checks = verdict(dumps(report), repo, tmp_path).checks
    assert checks["audit"].findings == ()
    # The trail and the (absent) claims agree; the net change is nothing, so a session
    # that said done delivered nothing: the one finding is that, not a claim mismatch.
    assert [f.code for f in checks["changes"].findings] == ["change.empty_session"]


def test_claims_compose_modes_and_drop_a_file_restored() -> None:
    a, b = "a" * 64, "b" * 64
    effects = [
        {
            "path": "run.sh",
            "sha256_before": a,
            "sha256_after": a,
            "mode_before": "100644",
            "mode_after": "100755",
        },
        {"path": "x.py", "sha256_before": a, "sha256_after": b},
        {"path": "x.py", "sha256_before": b, "sha256_after": a},
    ]
    assert claims_from_effects(effects) == [
        {
            "path": "run.sh",
            "action": "modify",
            "sha256_before": a,
            "sha256_after": a,
            "mode_before": "100644",
            "mode_after": "100755",
        }
    ]


def test_a_path_outside_the_repository_is_denied_and_never_touched(
    repo: GitRepo, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    replies = [
        response(call("write_file", "c1", path="../outside.txt", content="x")),
        response({"text": "Tried."}),
    ]
    report, _ = record(repo, tmp_path, replies)
    entry = report["audit"]["entries"][1]
    assert (entry["decision"], entry["effects"]) == ("deny", [])
    assert not outside.exists()
    answer = report["trajectory"]["contents"][2]["parts"][0]["function_response"]["response"]
    assert "outside the repository" in answer["error"]


def test_float_arguments_hash_as_the_verifier_reads_them(repo: GitRepo, tmp_path: Path) -> None:
    # 30.0 is written `30.0` by json.dumps but `30` in JCS: the hash is the JCS one.
    replies = [
        response(call("run_command", "c1", command="git status", timeout_s=30.0, ratio=0.1)),
        response({"text": "Looked."}),
    ]
    report, _ = record(repo, tmp_path, replies)
    checks = verdict(dumps(report), repo, tmp_path).checks
    assert checks["audit"].findings == ()


def test_non_ascii_is_written_as_utf8_and_verifies(repo: GitRepo, tmp_path: Path) -> None:
    replies = [
        fix(),
        response(call("write_file", "c1", path="données/été.txt", content="😀 café\n")),
        response({"text": "Écrit."}),
    ]
    report, _ = record(repo, tmp_path, replies)
    raw = dumps(report)
    assert "données/été.txt".encode() in raw and b"\\u00e9" not in raw
    claims = {c["path"]: c["sha256_after"] for c in report["changes"]}
    assert claims["données/été.txt"] == sha256("😀 café\n".encode())
    delivered(raw, repo, tmp_path)


def test_nul_in_a_file_and_a_response_verifies(repo: GitRepo, tmp_path: Path) -> None:
    replies = [
        fix(),
        response(call("write_file", "c1", path="blob.bin", content="a\x00b")),
        response(call("read_file", "c2", path="blob.bin")),
        response({"text": "Wrote a NUL."}),
    ]
    report, _ = record(repo, tmp_path, replies)
    raw = dumps(report)
    assert b"\\u0000" in raw
    claims = {c["path"]: c["sha256_after"] for c in report["changes"]}
    assert claims["blob.bin"] == sha256(b"a\x00b")
    delivered(raw, repo, tmp_path)


def test_nul_in_an_indexed_string_is_refused_naming_the_field(
    repo: GitRepo, tmp_path: Path
) -> None:
    with pytest.raises(RecorderError) as info:
        recorder(repo.path, tmp_path / "t.jsonl", branch="agent/\x00x")
    assert info.value.field == "repo.branch"
    rec = recorder(repo.path, tmp_path / "t2.jsonl")
    with pytest.raises(RecorderError) as info:
        rec.finish("do\x00ne")
    assert info.value.field == "status"


def test_timestamps_with_an_offset_are_written_in_utc(repo: GitRepo, tmp_path: Path) -> None:
    paris = timezone(timedelta(hours=1))
    moments = iter(
        datetime(2026, 11, 29, 11, 0, tzinfo=paris) + timedelta(seconds=s) for s in range(99)
    )
    replies = [fix(), response({"text": "Fixed."})]
    report, _ = record(repo, tmp_path, replies, clock=lambda: next(moments))
    assert report["started_at"] == "2026-11-29T10:00:00.000000Z"
    assert [e["ts"][-1] for e in report["audit"]["entries"]] == ["Z"] * 3
    delivered(dumps(report), repo, tmp_path)


def test_a_naive_clock_is_refused_and_a_clock_set_back_never_makes_time_decrease(
    repo: GitRepo, tmp_path: Path
) -> None:
    with pytest.raises(RecorderError) as info:
        recorder(repo.path, tmp_path / "t.jsonl", clock=lambda: datetime(2026, 11, 29))
    assert info.value.field == "clock"
    readings = iter(
        [datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC), datetime(2026, 11, 29, 10, 0, 1, tzinfo=UTC)]
    )
    rec = recorder(repo.path, tmp_path / "t2.jsonl", clock=lambda: next(readings))
    report = rec.finish("done")
    assert report["started_at"] == report["ended_at"] == "2026-11-29T10:00:05.000000Z"


def test_work_left_in_the_working_tree_is_delivered_with_a_null_head(
    repo: GitRepo, tmp_path: Path
) -> None:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    run_session(rec, ScriptedClient(load_turns(FIX_CALC)))
    report = rec.finish("done")
    assert report["repo"]["head_commit"] is None
    delivered(dumps(report), repo, tmp_path)


def test_a_trail_file_is_never_overwritten(repo: GitRepo, tmp_path: Path) -> None:
    trail = tmp_path / "s-1.jsonl"
    trail.write_bytes(b"earlier\n")
    with pytest.raises(RecorderError) as info:
        recorder(repo.path, trail)
    assert info.value.field == "trail"
    assert trail.read_bytes() == b"earlier\n"


def test_a_recorded_session_whose_work_is_not_real_is_not_delivered(
    repo: GitRepo, tmp_path: Path
) -> None:
    # The agent says done, but its edit breaks add(): the recorder records it faithfully.
    replies = [
        response(
            call(
                "replace_lines",
                "c1",
                path="calc.py",
                start_line=2,
                end_line=2,
                expected="    return a + b\n",
                replacement="    return a * b\n",
            )
        ),
        response({"text": "Fixed."}),
    ]
    report, _ = record(repo, tmp_path, replies)
    v = verdict(dumps(report), repo, tmp_path)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert findings(v) == ["tests.failed"]
