"""More of issue 17's scenarios, each run on the real gemini-cli 0.61.0 (scripted model turns,
its own tools doing the work) in a real repository, then verified as a user would: the two
model families, absolute paths inside and outside the workspace, a call gemini-cli's policy
denies, a session cut by a timeout, a sub-agent, and ``verifier gemini-cli import`` of a
session run without our hooks.

Without gemini-cli these skip with the way to install it; in CI (``CI`` set) they fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from audit.jcs import jcs_sha256
from tests.support import geminicli
from tests.support.geminicli import turn
from tests.support.geminicli_recorded import (
    install,
    record,
    start,
    trail_verify,
    verify,
    wait_for_call,
)
from tests.support.gitrepo import GitRepo, sha256
from tests.support.sessions import config_toml

BUGGY, FIXED = "    return a + b\n", "    return a - b\n"
PYTEST = {"run_shell_command": {"command": "python3 -m pytest -q -p no:cacheprovider"}}
SED = "sed -i '6s/a + b/a - b/' calc.py"  # subtract's body, line 6 of calc.py


def replace(path: str) -> dict:
    """The honest fix of subtract, on `path` as the model names it."""
    return {
        "replace": {
            "file_path": path,
            "old_string": "def subtract(a, b):\n" + BUGGY,
            "new_string": "def subtract(a, b):\n" + FIXED,
            "instruction": "subtract subtracts",
        }
    }


def responses(transcript: Path) -> dict[str, dict]:
    """What the model got back for each call of `transcript`, by tool name (the last call's)."""
    out: dict[str, dict] = {}
    for line in transcript.read_text().splitlines():
        for call in json.loads(line).get("toolCalls", ()):
            for part in call.get("result") or ():
                out[call["name"]] = part["functionResponse"]["response"]
    return out


@pytest.mark.parametrize(
    ("model", "profile", "todos", "absolute"),
    [
        # write_todos: registered for Gemini 2 models that are not previews only.
        (geminicli.LEGACY_MODEL, "gemini-cli-0.61-legacy", "allow", False),
        (geminicli.GEMINI_3_MODEL, "gemini-cli-0.61-gemini-3", "refused", False),
        # the model names the file by its absolute path inside the workspace
        (geminicli.GEMINI_3_MODEL, "gemini-cli-0.61-gemini-3", "refused", True),
    ],
)
def test_each_model_family_is_recorded_with_its_profile_and_verifies(
    gemini: Path,
    repo: GitRepo,
    tmp_path: Path,
    model: str,
    profile: str,
    todos: str,
    absolute: bool,
) -> None:
    plan = {"write_todos": {"todos": [{"description": "fix subtract", "status": "in_progress"}]}}
    path = str(repo.path / "calc.py") if absolute else "calc.py"
    script = [turn(plan), turn(replace(path)), turn(PYTEST), turn("Done.")]
    rec = record(gemini, repo, tmp_path / "home", script, model=model)
    assert rec.run.returncode == 0, rec.run.stderr[-2000:]
    assert (rec.report["agent"]["model"], rec.report["agent"]["tool_profile"]) == (model, profile)
    assert [(c["tool"], c["decision"]) for c in rec.calls()] == [
        ("write_todos", todos),
        ("replace", "allow"),
        ("run_shell_command", "allow"),
    ]
    assert trail_verify(rec.trail) == 0
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (0, "delivered"), verdict.findings
    assert verdict.result["checks"]["audit"]["details"]["profile"] == profile


def test_a_write_into_a_workspace_folder_outside_the_repository_is_not_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    """gemini-cli's workspace can hold more than the repository (``includeDirectories``): a
    write there succeeds, and is not the repository's (``replay.outside_workspace``); a
    write outside every workspace folder is refused before it runs."""
    home, other, nowhere = tmp_path / "home", tmp_path / "other", tmp_path / "nowhere.py"
    other.mkdir()
    (home / ".gemini").mkdir(parents=True)
    settings = {"context": {"includeDirectories": [str(other)]}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    text = (repo.path / "calc.py").read_text().replace(BUGGY, FIXED)
    refused = {"write_file": {"file_path": str(nowhere), "content": text}}
    elsewhere = {"write_file": {"file_path": str(other / "calc.py"), "content": text}}
    rec = record(gemini, repo, home, [turn(refused), turn(elsewhere), turn("Done.")])
    assert not nowhere.exists() and (other / "calc.py").read_text() == text
    assert [(c["tool"], c["decision"], c["effects"]) for c in rec.calls()] == [
        ("write_file", "refused", []),
        ("write_file", "allow", []),  # nothing of the repository changed
    ]
    assert rec.report["changes"] == []
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (1, "not_delivered"), verdict.findings
    assert "replay.outside_workspace" in verdict.findings
    assert "tests.failed" in verdict.findings


def test_a_call_gemini_clis_policy_denies_then_done_is_not_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    """Two denials: a user policy file's rule on the command (the tool is registered, our
    BeforeTool runs, gemini-cli then denies the call and the command never runs), and
    ``tools.exclude`` (the tool is not registered: "not found", no hook, ``refused``)."""
    home = tmp_path / "home"
    (home / ".gemini" / "policies").mkdir(parents=True)
    (home / ".gemini" / "policies" / "no-sed.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "sed"\n'
        'decision = "deny"\npriority = 900\ndenyMessage = "No sed here."\n'
    )
    settings = {"tools": {"exclude": ["write_file"]}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    text = (repo.path / "calc.py").read_text().replace(BUGGY, FIXED)
    write = {"write_file": {"file_path": "calc.py", "content": text}}
    sed = {"run_shell_command": {"command": SED}}
    rec = record(gemini, repo, home, [turn(write), turn(sed), turn("Fixed, done.")])
    assert rec.run.returncode == 0, rec.run.stderr[-2000:]
    assert (repo.path / "calc.py").read_text().endswith(BUGGY)  # neither call ran
    got = responses(rec.folder / "transcript.jsonl")
    assert got["run_shell_command"] == {"error": "Tool execution denied by policy. No sed here."}
    assert got["write_file"]["error"].startswith('Tool "write_file" not found')
    write_entry, sed_entry = rec.calls()
    assert (write_entry["tool"], write_entry["decision"]) == ("write_file", "refused")
    assert (sed_entry["tool"], sed_entry["decision"]) == ("run_shell_command", "deny")
    assert sed_entry["effects"] == []
    assert sed_entry["result_sha256"] == jcs_sha256(got["run_shell_command"])
    assert rec.report["status"] == "done" and rec.report["changes"] == []
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (1, "not_delivered"), verdict.findings
    assert {"change.empty_session", "tests.failed"} <= set(verdict.findings)


def test_a_call_the_users_own_hook_blocks_then_done_is_not_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    """Headless, a user rejects a call through a hook of their own (gemini-cli's prompt is
    interactive only): a ``BeforeTool`` hook of the user's settings answers ``deny``; ours
    runs beside it, gemini-cli answers the model "Tool execution blocked", the command never
    runs."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    script = tmp_path / "deny.py"
    deny = {"decision": "deny", "reason": "no shell here"}
    script.write_text(f"print({json.dumps(json.dumps(deny))})\n")
    command = f"{sys.executable} {script}"
    user_hook = {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": command}]}
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"hooks": {"BeforeTool": [user_hook]}})
    )
    sed = {"run_shell_command": {"command": SED}}
    rec = record(gemini, repo, home, [turn(sed), turn("Fixed, done.")])
    assert rec.run.returncode == 0, rec.run.stderr[-2000:]
    assert (repo.path / "calc.py").read_text().endswith(BUGGY)
    got = responses(rec.folder / "transcript.jsonl")
    assert got["run_shell_command"] == {"error": "Tool execution blocked: no shell here"}
    (entry,) = rec.calls()
    assert (entry["tool"], entry["decision"], entry["effects"]) == ("run_shell_command", "deny", [])
    assert entry["result_sha256"] == jcs_sha256(got["run_shell_command"])
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (1, "not_delivered"), verdict.findings
    assert {"change.empty_session", "tests.failed"} <= set(verdict.findings)


def _until(condition: Callable[[], bool], failure: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.2)


@pytest.mark.parametrize("kill", ["TERM", "KILL"])
def test_a_session_cut_by_a_timeout_mid_call_is_not_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path, kill: str
) -> None:
    """``timeout -s SIGNAL 600 gemini ...``, its time up while a shell command runs (SIGALRM
    to `timeout` is its own expiry: it signals gemini-cli's process group). The command leads
    a process group of its own and outlives gemini-cli: the change it makes after the end is
    nobody's claim. TERM: gemini-cli's SessionEnd still fires (reason ``exit``), the trail is
    finished, the status ``error``. KILL: no hook sees the end; the next session finishes the
    report, the trail stays unfinished."""
    install(repo)
    before = (repo.path / "calc.py").read_text()
    running = tmp_path / "running"  # outside the repository: no change of the session's
    command = f"touch {running} && sleep 3 && {SED}"
    script = [turn({"run_shell_command": {"command": command}}), turn("Done.")]
    wrapper = ("timeout", "-s", kill, "600")
    started = start(gemini, repo, tmp_path / "home", script, wrapper=wrapper)
    folder = wait_for_call(repo, "run_shell_command")
    _until(running.exists, "the command never started")
    os.kill(started.pid, signal.SIGALRM)
    assert started.wait(timeout=120) in (124, -signal.SIGKILL)  # timed out, or killed with it
    calc = repo.path / "calc.py"  # the orphaned command changes it after the end
    _until(lambda: calc.read_text() != before, "the command never changed calc.py")
    if kill == "TERM":
        report = json.loads((folder / "report.json").read_bytes())
        assert (report["status"], report["extensions"]["gemini_cli"]["end"]) == (
            "error",
            "session_end:exit",
        )
        assert trail_verify(folder / "trail.jsonl") == 0
    else:
        assert not (folder / "report.json").exists()
        record(gemini, repo, tmp_path / "home2", [turn("Nothing to do.")])
        report = json.loads((folder / "report.json").read_bytes())
        assert (report["status"], report["extensions"]["gemini_cli"]["end"]) == (
            "cancelled",
            "not_seen",
        )
        assert trail_verify(folder / "trail.jsonl") == 3  # unfinished
    # The cut call never reached the transcript: no entry, no claim.
    kinds = [json.loads(line)["kind"] for line in (folder / "trail.jsonl").read_text().split()]
    assert kinds == (["session_start", "session_end"] if kill == "TERM" else ["session_start"])
    assert report["changes"] == []
    verdict = verify(folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (1, "not_delivered"), verdict.findings
    assert verdict.result["done"] is False
    assert "change.undeclared" in verdict.findings
    assert ("audit.last_not_end" in verdict.findings) == (kill == "KILL")


def test_a_sub_agents_edit_is_claimed_through_invoke_agent_and_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    """0.61 runs sub-agents headless (``invoke_agent``, the built-in ``generalist``) on the
    same scripted turns: the sub-agent's own calls fire our tool hooks but are in its own
    transcript, not the session's; the tree's snapshots around ``invoke_agent`` give it the
    sub-agent's effects."""
    delegate = {"invoke_agent": {"agent_name": "generalist", "prompt": "Fix subtract."}}
    finish = {"complete_task": {"result": {"response": "subtract fixed"}}}
    script = [turn(delegate), turn(replace("calc.py")), turn(finish), turn("Done.")]
    rec = record(gemini, repo, tmp_path / "home", script)
    assert rec.run.returncode == 0, rec.run.stderr[-2000:]
    (call,) = rec.calls()
    assert call["tool"] == "invoke_agent" and [e["path"] for e in call["effects"]] == ["calc.py"]
    (sub,) = geminicli.transcripts(tmp_path / "home")[0].parent.glob("*/*.jsonl")
    assert json.loads(sub.read_text().splitlines()[0])["kind"] == "subagent"
    assert [c["path"] for c in rec.report["changes"]] == ["calc.py"]
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (0, "delivered"), verdict.findings


def _verifier(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_an_imported_transcript_of_a_session_without_hooks_is_honest_about_the_trail(
    repo: GitRepo, tmp_path: Path
) -> None:
    """No hooks: ``verifier gemini-cli import`` on gemini-cli's own transcript. The edit names
    calc.py by its absolute path (gemini-cli's way), the note by a relative one."""
    note = {"write_file": {"file_path": "NOTES.md", "content": "subtract subtracts\n"}}
    script = [turn(replace(str(repo.path / "calc.py")), note), turn(PYTEST), turn("Done.")]
    ran = geminicli.session(repo.path, tmp_path / "home", script)
    assert ran.returncode == 0 and ran.transcript is not None, ran.stderr[-2000:]
    assert not (repo.path / ".git" / "verifier").exists()  # no hook of ours ran
    out = tmp_path / "report.json"
    (tmp_path / "lax").mkdir()
    strict = config_toml(tmp_path, repo)
    lax = config_toml(tmp_path / "lax", repo, trail="optional")
    done = _verifier(
        *("gemini-cli", "import", str(ran.transcript), "--repo", str(repo.path)),
        *("--out", str(out), "--config", str(strict)),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_bytes())
    assert report["audit"]["trail"] == "none"
    assert sorted(c["path"] for c in report["changes"]) == ["NOTES.md", "calc.py"]

    verdict = verify(out, strict)
    assert (verdict.code, verdict.status) == (3, "inconclusive"), verdict.findings
    assert verdict.findings == ["audit.no_trail"]
    text = " ".join(_verifier("verify", str(out), "--config", str(strict)).stdout.split())
    assert "verdict: inconclusive" in text and "audit.no_trail" in text

    accepted = verify(out, lax)
    assert (accepted.code, accepted.status) == (0, "delivered"), accepted.findings
    checks = accepted.result["checks"]
    replay = checks["replay"]  # the absolute path replays as calc.py
    assert (replay["status"], replay["details"]["replayed"]) == ("pass", 2), replay
    assert replay["details"]["not_replayable"] == {}
    (noted,) = [n for n in checks["audit"]["notes"] if "no audit trail" in n]
    text = " ".join(_verifier("verify", str(out), "--config", str(lax)).stdout.split())
    assert "verdict: delivered" in text and " ".join(noted.split()) in text


def _import(transcript: Path, repo: GitRepo, out: Path, config: Path) -> dict:
    done = _verifier(
        *("gemini-cli", "import", str(transcript), "--repo", str(repo.path)),
        *("--out", str(out), "--config", str(config)),
    )
    assert done.returncode == 0, done.stderr
    assert "sub-agent transcript" in done.stderr
    report = json.loads(out.read_bytes())
    [sub] = report["extensions"]["gemini_cli"]["subagents"]
    assert Path(sub["transcript"]).parent.name == report["session_id"].removeprefix("gemini-cli-")
    return report


DELEGATE = {"invoke_agent": {"agent_name": "generalist", "prompt": "Do it."}}
FINISH = {"complete_task": {"result": {"response": "done"}}}


def test_an_imported_session_claims_the_edits_of_its_sub_agent(
    repo: GitRepo, tmp_path: Path
) -> None:
    """The sub-agent's edit is in its own transcript only (beside the session's)."""
    script = [turn(DELEGATE), turn(replace("calc.py")), turn(FINISH), turn("Done.")]
    ran = geminicli.session(repo.path, tmp_path / "home", script)
    assert ran.returncode == 0 and ran.transcript is not None, ran.stderr[-2000:]
    out, config = tmp_path / "report.json", config_toml(tmp_path, repo, trail="optional")
    report = _import(ran.transcript, repo, out, config)
    assert [c["path"] for c in report["changes"]] == ["calc.py"]
    verdict = verify(out, config)
    assert (verdict.code, verdict.status) == (0, "delivered"), verdict.findings


def test_an_imported_session_takes_its_and_its_sub_agents_edits_in_time_order(
    repo: GitRepo, tmp_path: Path
) -> None:
    """A sub-agent documents add, then the session fixes subtract in the same file: the
    session's transcript comes first, the file's last content is its last edit's."""
    document = {
        "replace": {
            "file_path": "calc.py",
            "old_string": "def add(a, b):\n",
            "new_string": 'def add(a, b):\n    """a plus b."""\n',
            "instruction": "document add",
        }
    }
    script = [turn(DELEGATE), turn(document), turn(FINISH), turn(replace("calc.py"))]
    ran = geminicli.session(repo.path, tmp_path / "home", [*script, turn("Done.")])
    assert ran.returncode == 0 and ran.transcript is not None, ran.stderr[-2000:]
    final = (repo.path / "calc.py").read_bytes()
    assert b'"""a plus b."""' in final and final.endswith(FIXED.encode())
    out, config = tmp_path / "report.json", config_toml(tmp_path, repo, trail="optional")
    [claim] = _import(ran.transcript, repo, out, config)["changes"]
    assert (claim["path"], claim["sha256_after"]) == ("calc.py", sha256(final))
