"""A gemini-cli session of several prompts, recorded by our hooks through to its end: the
real gemini-cli 0.61.0 in ACP mode (``--acp``: JSON-RPC on stdin and stdout, one session,
a prompt after another, as an editor drives it), scripted model turns, its real tools.

In ACP mode 0.61 fires ``BeforeAgent``, ``BeforeModel`` and ``AfterAgent`` for each
prompt, and one ``SessionEnd`` at exit under the process's own session id, but no tool
hook (``BeforeTool``, ``AfterTool``): the calls it ran are recorded as the calls no
hook saw (``refused``, no effects), and the session is never delivered on that record.

Without gemini-cli these skip with the way to install it; in CI (``CI`` set) they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support import geminicli
from tests.support.geminicli import turn
from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml
from verifier.app import geminicli_hooks
from verifier.demo.geminicli import SCENARIOS

# The demo's honest session (replace fixes subtract(), the tests run, done), then a note.
NOTE = {"write_file": {"file_path": "NOTES.md", "content": "subtract fixed\n"}}


class Acp:
    """gemini-cli in ACP mode: requests written, answers read, the agent's own requests
    (a permission asked) answered with its first option."""

    def __init__(self, gemini: Path, repo: Path, home: Path, turns: list[dict[str, Any]]):
        home.mkdir(parents=True)
        script = home / "turns.jsonl"
        script.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GEMINI_API_KEY": "scripted",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_CLI_NO_RELAUNCH": "true",  # one node process, as `geminicli.run`
            "NO_COLOR": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # the session's pytest needs no plugin
        }
        self.proc = subprocess.Popen(
            [str(gemini), "--acp", "--yolo", "--fake-responses-non-strict", str(script)],
            cwd=repo,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.watchdog = threading.Timer(240, self.proc.kill)  # a hung agent fails the test
        self.watchdog.start()
        self.last = 0

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.last += 1
        request = {"jsonrpc": "2.0", "id": self.last, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, f"gemini-cli stopped before answering {method}"
            message = json.loads(line)
            if "method" in message and "id" in message:  # the agent asks: allow
                options = message["params"].get("options") or [{"optionId": "allow"}]
                outcome = {"outcome": "selected", "optionId": options[0]["optionId"]}
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}}
                self.proc.stdin.write(json.dumps(answer) + "\n")
                self.proc.stdin.flush()
            elif message.get("id") == self.last:
                assert "error" not in message, message
                return dict(message["result"])

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # the client goes: gemini-cli ends the session and exits
        code = self.proc.wait(timeout=120)
        self.watchdog.cancel()
        return code


@pytest.fixture
def gemini() -> Path:
    return geminicli.require()


def test_a_session_of_two_prompts_is_recorded_whole_but_its_unseen_calls_never_deliver(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    geminicli_hooks.install(repo.path)
    first = SCENARIOS[0].turns(repo.path)
    acp = Acp(gemini, repo.path, tmp_path / "home", [*first, turn(NOTE), turn("Noted.")])
    acp.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = acp.call("session/new", {"cwd": str(repo.path), "mcpServers": []})
    for text in ("Fix subtract.", "Write a note of it."):
        prompt = [{"type": "text", "text": text}]
        answer = acp.call("session/prompt", {"sessionId": session["sessionId"], "prompt": prompt})
        assert answer["stopReason"] == "end_turn", answer
    (folder,) = [p for p in (repo.path / ".git" / "verifier").iterdir() if p.is_dir()]
    assert not (folder / "report.json").exists()  # two prompts answered, the session goes on
    assert acp.close() == 0
    assert not (folder / "hook-errors.log").exists(), (folder / "hook-errors.log").read_text()

    report = json.loads((folder / "report.json").read_bytes())
    assert report["session_id"] == session["sessionId"]
    assert report["status"] == "done"
    assert report["extensions"]["gemini_cli"]["end"] == "session_end:exit"
    entries = [json.loads(line) for line in (folder / "trail.jsonl").read_text().splitlines()]
    calls = [e for e in entries if e["kind"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["replace", "run_shell_command", "write_file"]
    # No tool hook fired: each call is one no hook saw, though it ran.
    assert {(c["decision"], len(c["effects"])) for c in calls} == {("refused", 0)}
    assert (repo.path / "NOTES.md").exists() and report["changes"] == []
    assert [e["kind"] for e in entries].count("session_end") == 1
    prompts = [
        p["text"]
        for c in report["trajectory"]["contents"]
        if c["role"] == "user"
        for p in c["parts"]
        if "text" in p
    ]
    assert prompts[0].endswith("Fix subtract.") and prompts[-1].endswith("Write a note of it.")
    trail = subprocess.run(
        [sys.executable, "-m", "verifier", "trail", "verify", str(folder / "trail.jsonl")],
        check=False,
        capture_output=True,
    )
    assert trail.returncode == 0, trail.stdout
    done = subprocess.run(
        [
            *(sys.executable, "-m", "verifier", "verify", str(folder / "report.json")),
            *("--config", str(config_toml(tmp_path, repo)), "--format", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    result = json.loads(done.stdout)
    assert result["delivery_status"] == "not_delivered", result["checks"]
    codes = {f["code"] for check in result["checks"].values() for f in check["findings"] or ()}
    assert "change.undeclared" in codes, codes
