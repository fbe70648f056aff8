"""`verifier trail verify` on trails the recorder wrote: whole, tampered, cut by a crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from audit.jcs import canonicalize
from audit.trailfile import check_trail_lines
from tests.support import scripted
from tests.support.gitrepo import GitRepo
from tests.support.paths import TURNS
from tests.support.scripted import ScriptedClient, load_turns, recorder, run_session
from verifier.cli import run

FIX_CALC = TURNS / "fix_calc.json"


def trail_verify(*args: str) -> tuple[int, str]:
    """The real command line, in a subprocess: its exit code and stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "verifier", "trail", "verify", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout


def finished_trail(repo: GitRepo, tmp_path: Path) -> Path:
    trail = tmp_path / "s-1.jsonl"
    rec = recorder(repo.path, trail)
    rec.finish(run_session(rec, ScriptedClient(load_turns(FIX_CALC))))
    return trail


def test_a_finished_trail_is_intact_and_complete(repo: GitRepo, tmp_path: Path) -> None:
    trail = finished_trail(repo, tmp_path)
    assert run(["trail", "verify", str(trail)]) == 0
    code, out = trail_verify(str(trail), "--format", "json")
    assert code == 0
    assert json.loads(out) == {
        "trail": str(trail),
        "status": "intact",
        "count": 5,
        "session_id": "s-1",
        "line": None,
        "code": None,
        "problem": None,
    }


def test_a_tampered_line_is_broken_and_named(repo: GitRepo, tmp_path: Path) -> None:
    trail = finished_trail(repo, tmp_path)
    lines = trail.read_bytes().splitlines()
    entry = json.loads(lines[2])
    entry["effects"][0]["sha256_after"] = "0" * 64  # rewritten after the fact
    lines[2] = canonicalize(entry)
    trail.write_bytes(b"\n".join(lines) + b"\n")
    code, out = trail_verify(str(trail))
    assert code == 1
    assert "broken at line 3" in out and "hash does not match" in out and "2 intact" in out
    assert run(["trail", "verify", str(trail)]) == 1


def test_a_line_dropped_breaks_the_chain_at_the_next_one(repo: GitRepo, tmp_path: Path) -> None:
    trail = finished_trail(repo, tmp_path)
    lines = trail.read_bytes().splitlines(keepends=True)
    trail.write_bytes(b"".join(lines[:2] + lines[3:]))
    result = check_trail_lines(trail.read_bytes())
    assert (result.status, result.line, result.count, result.code) == (
        "broken",
        3,
        2,
        "audit.seq_gap",
    )


def test_another_session_named_is_broken_at_the_first_line(repo: GitRepo, tmp_path: Path) -> None:
    trail = finished_trail(repo, tmp_path)
    code, out = trail_verify(str(trail), "--session", "s-2")
    assert code == 1 and "broken at line 1" in out


def test_a_last_line_cut_short_is_unfinished_with_the_entries_before_it(
    repo: GitRepo, tmp_path: Path
) -> None:
    trail = finished_trail(repo, tmp_path)
    data = trail.read_bytes()
    trail.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 40])
    code, out = trail_verify(str(trail), "--format", "json")
    assert code == 3
    assert json.loads(out)["count"] == 4 and "cut short" in json.loads(out)["problem"]


def test_garbage_in_the_middle_is_broken_not_unfinished(repo: GitRepo, tmp_path: Path) -> None:
    trail = finished_trail(repo, tmp_path)
    lines = trail.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][:30] + b"\n"
    trail.write_bytes(b"".join(lines))
    result = check_trail_lines(trail.read_bytes())
    assert (result.status, result.line, result.count) == ("broken", 2, 1)


def test_an_unreadable_trail_is_a_usage_error(tmp_path: Path) -> None:
    assert run(["trail", "verify", str(tmp_path / "missing.jsonl")]) == 2


@pytest.mark.parametrize("stop_after", [1, 3])
def test_a_harness_killed_mid_session_leaves_a_trail_intact_up_to_the_crash(
    repo: GitRepo, tmp_path: Path, stop_after: int
) -> None:
    trail = tmp_path / "s-1.jsonl"
    child = subprocess.Popen(
        [
            sys.executable,
            scripted.__file__,
            str(repo.path),
            str(trail),
            str(FIX_CALC),
            str(stop_after),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == f"{stop_after}\n"  # that many entries are on disk
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    code, out = trail_verify(str(trail), "--format", "json")
    assert code == 3
    assert json.loads(out)["count"] == stop_after
    assert json.loads(out)["status"] == "unfinished"
