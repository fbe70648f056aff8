"""gemini-cli sessions recorded by our hooks, for the end-to-end tests: ``verifier gemini-cli
install`` as a user runs it, the real gemini-cli run on scripted turns (`tests.support.geminicli`),
the session's folder under the git directory read back, and ``verifier verify`` and ``verifier
trail verify`` run on what the hooks wrote, as processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import geminicli
from tests.support.gitrepo import GitRepo

__all__ = [
    "Recorded",
    "Verdict",
    "install",
    "record",
    "sessions",
    "start",
    "trail_verify",
    "verify",
    "wait_for_call",
]


@dataclass
class Recorded:
    """What one gemini-cli session left: its folder under the git directory, parsed."""

    run: subprocess.CompletedProcess[str]
    folder: Path
    report: dict[str, Any]

    @property
    def trail(self) -> Path:
        return self.folder / "trail.jsonl"

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.trail.read_text().splitlines()]

    def calls(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e["kind"] == "tool_call"]


@dataclass
class Verdict:
    """``verifier verify --format json``'s exit code, its verdict and every finding's code."""

    code: int
    status: str
    findings: list[str]
    result: dict[str, Any]


def sessions(repo: GitRepo) -> list[Path]:
    """The session folders the hooks made under the git directory, oldest first."""
    base = repo.path / ".git" / "verifier"
    return sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime_ns)


def _verifier(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def install(repo: GitRepo, *options: str) -> None:
    """``verifier gemini-cli install``, as a user runs it."""
    done = _verifier("gemini-cli", "install", "--repo", str(repo.path), *options, timeout=120)
    assert done.returncode == 0, done.stderr


def record(
    gemini: Path, repo: GitRepo, home: Path, turns: list[dict[str, Any]], **kw: Any
) -> Recorded:
    """One scripted session with our hooks (installed first when they are not): what they
    wrote, the hooks having logged no error."""
    if not (repo.path / ".git" / "verifier" / "install.json").exists():
        install(repo)
    before = set(sessions(repo)) if (repo.path / ".git" / "verifier").is_dir() else set()
    done = geminicli.run(gemini, repo.path, home, turns, **kw)
    (folder,) = [p for p in sessions(repo) if p not in before]
    errors = folder / "hook-errors.log"
    assert not errors.exists(), errors.read_text()
    report_path = folder / "report.json"
    report = json.loads(report_path.read_bytes()) if report_path.exists() else {}
    return Recorded(done, folder, report)


def verify(report: Path, config: Path) -> Verdict:
    """``verifier verify REPORT --config CONFIG --format json``."""
    done = _verifier("verify", str(report), "--config", str(config), "--format", "json")
    result = json.loads(done.stdout)
    codes = [
        f["code"] for check in result["checks"].values() for f in (check.get("findings") or [])
    ]
    return Verdict(done.returncode, result["delivery_status"], codes, result)


def trail_verify(trail: Path) -> int:
    """``verifier trail verify``'s exit code: 0 intact and complete, 3 unfinished."""
    return _verifier("trail", "verify", str(trail)).returncode


def start(
    gemini: Path,
    repo: GitRepo,
    home: Path,
    turns: list[dict[str, Any]],
    *,
    wrapper: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """gemini-cli started on `turns` in a session of its own, not waited for; `wrapper`
    runs it (``timeout 600``, say)."""
    home.mkdir(parents=True)
    script = home / "turns.jsonl"
    script.write_text("".join(json.dumps(t) + "\n" for t in turns))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GEMINI_API_KEY": "scripted",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    args = [*wrapper, str(gemini), "-p", "Fix it.", "-o", "json", "--yolo"]
    return subprocess.Popen(
        [*args, "--fake-responses-non-strict", str(script)],
        cwd=repo.path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for_call(repo: GitRepo, tool: str, timeout: float = 180) -> Path:
    """The session folder once a BeforeTool of `tool` is recorded in its state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for state in (repo.path / ".git" / "verifier").glob("*/state.json"):
            with_tool = [p for p in json.loads(state.read_bytes())["pending"] if p["tool"] == tool]
            if with_tool:
                return state.parent
        time.sleep(0.2)
    raise AssertionError(f"no BeforeTool of {tool} within {timeout}s")
