"""gemini-cli sessions recorded live by our hooks, then verified: the real gemini-cli 0.61.0
(scripted model turns, its real tools), a real repository, ``verifier gemini-cli install``,
and ``verifier verify`` on the report the hooks wrote under the git directory.

Without gemini-cli these skip with the way to install it; in CI (``CI`` set) they fail.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.support.geminicli import turn
from tests.support.geminicli_recorded import (
    install,
    record,
    start,
    trail_verify,
    verify,
    wait_for_call,
)
from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml

FIXED = "    return a - b\n"
PYTEST = {"run_shell_command": {"command": "python3 -m pytest -q"}}


def fix(repo: GitRepo) -> dict:
    """The honest fix: subtract's body, matched exactly (the only `a + b` after `subtract`).

    The path is relative (gemini-cli resolves it in the workspace): the profiles do not map
    an absolute ``file_path`` to the repository yet, so its replay would not match.
    """
    return {
        "replace": {
            "file_path": "calc.py",
            "old_string": "def subtract(a, b):\n    return a + b\n",
            "new_string": "def subtract(a, b):\n" + FIXED,
            "instruction": "subtract subtracts",
        }
    }


def test_an_honest_edit_and_test_run_is_delivered_from_the_working_tree(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    rec = record(gemini, repo, tmp_path / "home", [turn(fix(repo)), turn(PYTEST), turn("Done.")])
    assert rec.run.returncode == 0, rec.run.stderr[-2000:]
    assert rec.report["status"] == "done" and rec.report["repo"]["head_commit"] is None
    assert [c["path"] for c in rec.report["changes"]] == ["calc.py"]
    assert [(c["tool"], c["decision"]) for c in rec.calls()] == [
        ("replace", "allow"),
        ("run_shell_command", "allow"),
    ]
    ids = {c["call_id"] for c in rec.calls()}
    transcript_ids = {
        p["functionCall"]["id"]
        for content in rec.report["trajectory"]["contents"]
        for p in content["parts"]
        if "functionCall" in p
    }
    assert ids == transcript_ids  # matched to the transcript's own ids
    assert trail_verify(rec.trail) == 0
    assert repo.git("status", "--porcelain") == "M calc.py"  # nothing of ours in the tree
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (0, "delivered"), verdict.findings


def test_a_session_that_commits_through_the_shell_is_delivered_in_commit_mode(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    commit = {"run_shell_command": {"command": "git add -A && git commit -q -m fix"}}
    rec = record(gemini, repo, tmp_path / "home", [turn(fix(repo)), turn(commit), turn("Done.")])
    head = repo.git("rev-parse", "HEAD")
    assert rec.report["repo"]["head_commit"] == head != rec.report["repo"]["base_commit"]
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (0, "delivered"), verdict.findings


def test_an_edit_made_by_sed_in_the_shell_is_claimed_from_the_snapshots(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    sed = {"run_shell_command": {"command": "sed -i '6s/a + b/a - b/' calc.py"}}
    rec = record(gemini, repo, tmp_path / "home", [turn(sed), turn("Done.")])
    (call,) = rec.calls()
    assert [e["path"] for e in call["effects"]] == ["calc.py"]
    assert (repo.path / "calc.py").read_text().endswith(FIXED)
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (0, "delivered"), verdict.findings


def test_an_edit_the_tool_rejects_then_done_is_not_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    wrong = fix(repo)
    # Nothing like it in calc.py: not even replace's fuzzy match finds it.
    wrong["replace"]["old_string"] = "class Calculator:\n    precision = 10\n"
    rec = record(gemini, repo, tmp_path / "home", [turn(wrong), turn("Fixed, done.")])
    (call,) = rec.calls()
    assert call["decision"] == "allow" and call["effects"] == []
    assert rec.report["status"] == "done" and rec.report["changes"] == []
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert verdict.code == 1 and verdict.status == "not_delivered", verdict
    assert "tests.failed" in verdict.findings


def test_a_write_to_the_wrong_path_is_not_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    text = (repo.path / "calc.py").read_text().replace("return a + b\n", "return a - b\n")
    write = {"write_file": {"file_path": str(repo.path / "src" / "calc.py"), "content": text}}
    rec = record(gemini, repo, tmp_path / "home", [turn(write), turn("Done.")])
    assert [c["path"] for c in rec.report["changes"]] == ["src/calc.py"]
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert verdict.code == 1 and "tests.failed" in verdict.findings, verdict


def test_a_call_gemini_cli_refuses_fires_no_hook_and_is_recorded_refused(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    outside = {"write_file": {"file_path": str(tmp_path / "elsewhere.py"), "content": "x = 1\n"}}
    rec = record(gemini, repo, tmp_path / "home", [turn(outside), turn(fix(repo)), turn("Done.")])
    assert [(c["tool"], c["decision"]) for c in rec.calls()] == [
        ("write_file", "refused"),
        ("replace", "allow"),
    ]
    assert not (tmp_path / "elsewhere.py").exists()
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (0, "delivered"), verdict.findings


def test_an_edit_that_breaks_the_tests_is_not_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    broken = fix(repo)
    broken["replace"]["new_string"] = "def subtract(a, b):\n    return b - a\n"
    rec = record(gemini, repo, tmp_path / "home", [turn(broken), turn("Done.")])
    assert [c["path"] for c in rec.report["changes"]] == ["calc.py"]
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert verdict.code == 1 and "tests.failed" in verdict.findings, verdict


def test_parallel_calls_in_one_turn_each_get_their_entry_and_effects(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    note = {"write_file": {"file_path": "NOTES.md", "content": "subtract\n"}}
    rec = record(gemini, repo, tmp_path / "home", [turn(fix(repo), note), turn("Done.")])
    by_tool = {c["tool"]: c for c in rec.calls()}
    assert [e["path"] for e in by_tool["replace"]["effects"]] == ["calc.py"]
    assert [e["path"] for e in by_tool["write_file"]["effects"]] == ["NOTES.md"]
    verdict = verify(rec.folder / "report.json", config_toml(tmp_path, repo))
    assert (verdict.code, verdict.status) == (0, "delivered"), verdict.findings


def test_a_killed_session_is_finished_by_the_next_one_its_trail_unfinished(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    install(repo)
    home = tmp_path / "home"
    script = [turn(fix(repo)), turn({"run_shell_command": {"command": "sleep 120"}})]
    started = start(gemini, repo, home, script)
    folder = wait_for_call(repo, "run_shell_command")
    os.killpg(started.pid, signal.SIGKILL)
    started.wait()
    assert not (folder / "report.json").exists()
    rec = record(gemini, repo, tmp_path / "home2", [turn("Nothing to do.")])
    assert rec.folder != folder
    report = json.loads((folder / "report.json").read_bytes())
    assert report["extensions"]["gemini_cli"]["end"] == "not_seen"
    assert report["status"] == "cancelled"
    assert trail_verify(folder / "trail.jsonl") == 3  # unfinished
    entries = [json.loads(line) for line in (folder / "trail.jsonl").read_text().splitlines()]
    assert [e.get("tool") for e in entries if e["kind"] == "tool_call"] == ["replace"]
    verdict = verify(folder / "report.json", config_toml(tmp_path, repo))
    assert verdict.code != 0 and "audit.last_not_end" in verdict.findings, verdict


def test_install_verify_shows_the_verdict_to_the_user_as_the_session_ends(
    gemini: Path, repo: GitRepo, tmp_path: Path
) -> None:
    config = config_toml(tmp_path, repo)
    install(repo, "--verify", "--config", str(config))
    rec = record(gemini, repo, tmp_path / "home", [turn(fix(repo)), turn("Done.")])
    verdict = json.loads((rec.folder / "verdict.json").read_bytes())
    assert verdict["session_id"] == rec.report["session_id"]
    assert verdict["done"] is True and verdict["delivery_status"] == "delivered", verdict
