"""The gemini-cli hook run as gemini-cli runs it, a process per event (JSON on stdin), on a
real repository, with a transcript in gemini-cli 0.61's format written beside it. The runs
with the real gemini-cli are in tests/e2e/test_geminicli_hooks.py."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from audit.jcs import jcs_sha256
from audit.trailfile import check_trail_file
from tests.support.gitrepo import GitRepo

HOOK = [sys.executable, "-I", "-m", "audit.geminicli.hook"]
SID = "0b4a1c2e-5d6f-4a7b-8c9d-0e1f2a3b4c5d"


def hook(cwd: Path, event: dict[str, Any] | bytes) -> subprocess.CompletedProcess[bytes]:
    data = event if isinstance(event, bytes) else json.dumps(event).encode()
    return subprocess.run(HOOK, input=data, cwd=cwd, capture_output=True, timeout=60, check=False)


class Session:
    """One session's events and its transcript, written as gemini-cli would."""

    def __init__(self, repo: GitRepo, tmp: Path) -> None:
        self.repo = repo
        self.transcript = tmp / "chats" / "session-1.jsonl"
        self.transcript.parent.mkdir(parents=True)
        header = {"sessionId": SID, "projectHash": "0" * 64, "startTime": "2026-12-03T10:00:00Z"}
        self.transcript.write_text(json.dumps(header) + "\n")
        self.folder = repo.path / ".git" / "verifier" / SID

    def event(self, name: str, **fields: Any) -> subprocess.CompletedProcess[bytes]:
        done = hook(
            self.repo.path,
            {
                "session_id": SID,
                "transcript_path": str(self.transcript),
                "cwd": str(self.repo.path),
                "hook_event_name": name,
                "timestamp": "2026-12-03T10:00:00.000Z",
                **fields,
            },
        )
        assert (done.returncode, done.stdout) == (0, b"{}\n"), done
        return done

    def record(self, **message: Any) -> None:
        with self.transcript.open("a") as fh:
            fh.write(json.dumps(message) + "\n")

    def model_calls(self, n: int, *calls: tuple[str, str, dict[str, Any], str]) -> None:
        """A model turn of `calls` (id, name, args, output), as recorded once they ran."""
        self.record(
            id=f"m{n}",
            type="gemini",
            content="",
            model="gemini-2.5-pro",
            tokens={"input": 100, "output": 10, "thoughts": 5, "cached": 20},
            toolCalls=[
                {
                    "id": cid,
                    "name": name,
                    "args": args,
                    "status": "success",
                    "result": [
                        {"functionResponse": {"id": cid, "name": name, "response": {"output": out}}}
                    ],
                }
                for cid, name, args, out in calls
            ],
        )

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.folder / "trail.jsonl").read_text().splitlines()]

    def report(self) -> dict[str, Any]:
        return json.loads((self.folder / "report.json").read_bytes())


def test_what_is_not_an_event_is_answered_empty_and_never_fails_gemini_cli(
    repo: GitRepo, tmp_path: Path
) -> None:
    for data, problem in (
        (b"not json", b"Expecting value"),
        (b"[]", b"expected an object"),
        (
            json.dumps({"hook_event_name": "BeforeTool", "session_id": "a/b", "cwd": "."}).encode(),
            b"session_id",
        ),
    ):
        done = hook(repo.path, data)
        assert (done.returncode, done.stdout) == (0, b"{}\n")
        assert problem in done.stderr
    outside = hook(
        tmp_path,
        {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(tmp_path)},
    )
    assert outside.returncode == 0 and b"in no git repository" in outside.stderr


def test_a_session_of_edits_and_a_refused_call_is_recorded_with_the_transcripts_ids(
    repo: GitRepo, tmp_path: Path
) -> None:
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    s.record(id="u1", type="user", content=[{"text": "Fix subtract."}])
    s.event("BeforeModel")
    args = {
        "file_path": str(repo.path / "calc.py"),
        "content": "def subtract(a, b):\n    return a - b\n",
    }
    s.event("BeforeTool", tool_name="write_file", tool_input=args)
    (repo.path / "calc.py").write_text(args["content"])
    s.event(
        "AfterTool", tool_name="write_file", tool_input=args, tool_response={"llmContent": "ok"}
    )
    outside = {"file_path": "/etc/passwd", "content": "x"}
    s.model_calls(1, ("w1", "write_file", args, "ok"), ("w2", "write_file", outside, "refused"))
    s.event("BeforeModel")
    s.record(
        id="m2",
        type="gemini",
        content="Done.",
        model="gemini-2.5-pro",
        tokens={"input": 50, "output": 3},
    )
    s.event("AfterAgent", prompt="Fix subtract.", prompt_response="Done.")
    s.event("SessionEnd", reason="exit")  # after AfterAgent: nothing more

    entries = s.entries()
    assert [e["kind"] for e in entries] == [
        "session_start",
        "tool_call",
        "tool_call",
        "session_end",
    ]
    first, second = entries[1], entries[2]
    assert (first["call_id"], first["decision"]) == ("w1", "allow")
    assert first["args_sha256"] == jcs_sha256(args)
    assert first["result_sha256"] == jcs_sha256({"output": "ok"})
    assert [e["path"] for e in first["effects"]] == ["calc.py"]
    assert (
        first["effects"][0]["sha256_after"] == hashlib.sha256(args["content"].encode()).hexdigest()
    )
    assert (second["call_id"], second["decision"], second["effects"]) == ("w2", "refused", [])
    assert entries[-1]["status"] == "done"
    assert check_trail_file(s.folder / "trail.jsonl").status == "intact"

    report = s.report()
    assert report["status"] == "done" and report["final_text"] == "Done."
    assert report["agent"] == {
        "name": "gemini-cli",
        "model": "gemini-2.5-pro",
        "tool_profile": "gemini-cli-0.61-legacy",
    }
    assert report["repo"]["name"] == "calc" and report["repo"]["head_commit"] is None
    assert report["audit"]["entries"] == entries
    assert [c["path"] for c in report["changes"]] == ["calc.py"]
    assert report["usage"] == {
        "turns": 2,
        "tool_calls": 2,
        "prompt_tokens": 150,
        "output_tokens": 18,
        "thoughts_tokens": 5,
        "cached_tokens": 20,
    }
    assert (s.folder / "transcript.jsonl").read_bytes() == s.transcript.read_bytes()
    assert repo.git("status", "--porcelain") == "M calc.py"  # nothing of ours in the work tree


def test_a_shell_call_gets_the_whole_trees_changes_and_a_read_only_tool_none(
    repo: GitRepo, tmp_path: Path
) -> None:
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    shell = {"command": "touch new.txt && rm pytest.ini"}
    read = {"file_path": str(repo.path / "calc.py")}
    s.event("BeforeTool", tool_name="read_file", tool_input=read)
    s.event("BeforeTool", tool_name="run_shell_command", tool_input=shell)
    (repo.path / "new.txt").write_text("")
    (repo.path / "pytest.ini").unlink()
    # Out of order, as parallel calls finish.
    s.event("AfterTool", tool_name="run_shell_command", tool_input=shell, tool_response={})
    s.event("AfterTool", tool_name="read_file", tool_input=read, tool_response={})
    s.model_calls(1, ("r1", "read_file", read, "..."), ("c1", "run_shell_command", shell, "ok"))
    s.event("SessionEnd", reason="exit")  # no AfterAgent: the model never answered

    calls = {e["call_id"]: e for e in s.entries() if e["kind"] == "tool_call"}
    assert calls["r1"]["effects"] == []
    assert [(e["path"], e["sha256_after"] is None) for e in calls["c1"]["effects"]] == [
        ("new.txt", False),
        ("pytest.ini", True),
    ]
    report = s.report()
    assert report["status"] == "error"
    assert report["extensions"]["gemini_cli"]["end"] == "session_end:exit"


def test_the_reports_repository_name_is_the_one_install_wrote(
    repo: GitRepo, tmp_path: Path
) -> None:
    (repo.path / ".git" / "verifier").mkdir()
    (repo.path / ".git" / "verifier" / "hook.json").write_text('{"v": 1, "repo_name": "calc-main"}')
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    s.event("AfterAgent", prompt="x", prompt_response="")
    assert s.report()["repo"]["name"] == "calc-main"


def test_an_audit_package_in_the_repository_cannot_stand_in_for_the_hook(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.write({"audit/__init__.py": "raise SystemExit('the repository ran instead')\n"})
    s = Session(repo, tmp_path)
    done = s.event("SessionStart", source="startup")
    assert b"the repository ran instead" not in done.stderr
    assert [e["kind"] for e in s.entries()] == ["session_start"]
