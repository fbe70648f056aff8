"""`make demo`: real sessions on a real repository, done versus delivered.

Builds a sample repository, runs nine scripted sessions through the reference
harness (a clean delivery, each kind of silent failure, a session that ran out
of turns, one in the working tree from a French harness, and one whose every
hash agrees though a bounded replace was done as a whole-file write), verifies every
report into the embedded store, and prints what the agents said beside what the
verifier proved. Everything is deterministic: running it again gives the same
reports, so the store keeps one session each and adds a run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verifier import render
from verifier.config import Config
from verifier.errors import ConfigError, SessionConflict
from verifier.findings import DeliveryStatus, Verification
from verifier.harness import (
    DEFAULT_TOOLS,
    ScriptedModel,
    Tool,
    agent_git,
    call,
    model_turn,
    run_session,
)
from verifier.pipeline import verify_report

CALC = """\
def add(a, b):
    return a + b


def subtract(a, b):
    return a + b


def multiply(a, b):
    return a * b
"""

TESTS = """\
from calc import add, multiply, subtract


def test_add():
    assert add(2, 3) == 5


def test_subtract():
    assert subtract(5, 3) == 2


def test_multiply():
    assert multiply(4, 3) == 12
"""

BASE_FILES = {
    "calc.py": CALC,
    "tests/test_calc.py": TESTS,
    "pytest.ini": "[pytest]\npythonpath = .\n",
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
    "README.md": "# calc\n\nA tiny calculator.\n",
}
TASK = "Make the test suite pass."
BUGGY = "    return a + b\n"
FIXED = "    return a - b\n"
PYTEST = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def _fix(call_id: str = "c2") -> list[Any]:
    """The turns of a model that reads calc.py, fixes subtract() and runs the tests."""
    return [
        model_turn(call("read_file", "c1", path="calc.py")),
        model_turn(
            call(
                "replace_lines",
                call_id,
                path="calc.py",
                start_line=6,
                end_line=6,
                expected=BUGGY,
                replacement=FIXED,
            )
        ),
        model_turn(call("run_command", "c3", command=PYTEST)),
        model_turn("Fixed the sign error in subtract(); all tests pass."),
    ]


@dataclass(frozen=True)
class Scenario:
    session_id: str
    story: str
    build: Callable[[Path, str], dict[str, Any]]


def _run_command(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """run_command as the demo's harness runs it: `python` is this interpreter, and the
    output carries no durations, so the reports are the same on every machine and run."""
    argv = [sys.executable if a == "python" else a for a in args["command"]]
    response = DEFAULT_TOOLS["run_command"](root, {**args, "command": argv})
    response["output"] = re.sub(r" in \d+\.\d+s\b", "", response["output"])
    return response


TOOLS: dict[str, Tool] = {**DEFAULT_TOOLS, "run_command": _run_command}


def _delivered(root: Path, sid: str) -> dict[str, Any]:
    return run_session(root, sid, TASK, ScriptedModel(_fix()), commit=True, tools=TOOLS).report()


def _missing_file(root: Path, sid: str) -> dict[str, Any]:
    """The new test file is written but `git commit -a` leaves untracked files out."""
    turns = [
        *_fix()[:2],
        model_turn(
            call(
                "write_file",
                "c4",
                path="tests/test_more.py",
                content="from calc import subtract\n\n\ndef test_negative():\n"
                "    assert subtract(1, 2) == -1\n",
            )
        ),
        model_turn("Fixed subtract() and added a test."),
    ]
    session = run_session(root, sid, TASK + " Add a test.", ScriptedModel(turns))
    agent_git(root, "commit", "-q", "-a", "-m", "agent: fix subtract")
    session.head_commit = agent_git(root, "rev-parse", "HEAD").decode().strip()
    return session.report()


def _off_by_one(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """A harness bug: the replace lands one line early and the expected text is not checked."""
    path = root / args["path"]
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start, end = int(args["start_line"]) - 1, int(args["end_line"]) - 1
    lines[start - 1 : end] = [args["replacement"]]
    path.write_text("".join(lines), encoding="utf-8")
    return {"ok": True}


def _wrong_range(root: Path, sid: str) -> dict[str, Any]:
    tools: dict[str, Tool] = {**TOOLS, "replace_lines": _off_by_one}
    session = run_session(
        root, sid, TASK, ScriptedModel(_fix()[:2] + _fix()[3:]), tools=tools, commit=True
    )
    # The agent claims the file it meant to write: the fix on line 6.
    intended = CALC.replace("def subtract(a, b):\n" + BUGGY, "def subtract(a, b):\n" + FIXED)
    claims = session.claims()
    claims[0]["sha256_after"] = _sha256(intended.encode())
    return session.report(claims=claims)


def _tests_fail(root: Path, sid: str) -> dict[str, Any]:
    turns = [
        model_turn(call("read_file", "c1", path="calc.py")),
        model_turn(
            call(
                "replace_lines",
                "c2",
                path="calc.py",
                start_line=6,
                end_line=6,
                expected=BUGGY,
                replacement="    return b - a\n",
            )
        ),
        model_turn("Fixed subtract()."),
    ]
    return run_session(root, sid, TASK, ScriptedModel(turns), commit=True).report()


def _audit_gap(root: Path, sid: str) -> dict[str, Any]:
    """The harness lost the log record of the edit; the rest of the chain is sound."""
    session = run_session(
        root, sid, TASK + " (audited)", ScriptedModel(_fix()), commit=True, tools=TOOLS
    )
    bodies = [b for b in session.bodies if b.get("call_id") != "c2"]
    return session.report(bodies=bodies)


def _undeclared(root: Path, sid: str) -> dict[str, Any]:
    """A formatter run rewrote README.md; the agent claims only calc.py."""
    fmt = ["python", "-c", "open('README.md', 'a').write('Formatted.\\n')"]
    turns = [*_fix()[:2], model_turn(call("run_command", "c5", command=fmt)), _fix()[3]]
    session = run_session(
        root, sid, TASK + " Format.", ScriptedModel(turns), commit=True, tools=TOOLS
    )
    claims = [c for c in session.claims() if c["path"] == "calc.py"]
    return session.report(claims=claims)


def _out_of_turns(root: Path, sid: str) -> dict[str, Any]:
    turns = [model_turn(call("read_file", None, path="calc.py")) for _ in range(3)]
    session = run_session(root, sid, TASK, ScriptedModel(turns), max_turns=2, commit=True)
    return session.report()


def _worktree_fr(root: Path, sid: str) -> dict[str, Any]:
    """A French harness, work left uncommitted in the working tree, positional call ids."""
    turns = [
        model_turn(call("read_file", None, path="calc.py")),
        model_turn(
            call(
                "edit_file",
                None,
                path="calc.py",
                old_text="return a + b\n\n\ndef mul",
                new_text="return a - b\n\n\ndef mul",
            )
        ),
        model_turn("Corrigé."),
    ]
    session = run_session(
        root, sid, "Corrige la soustraction.", ScriptedModel(turns), status_when_done="terminé"
    )
    session.bodies[-1]["status"] = "terminé"
    return session.report()


def _as_whole_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """A dispatcher still on the old vocabulary: a bounded replace becomes write_file."""
    (root / args["path"]).write_text(str(args["replacement"]), encoding="utf-8")
    return {"ok": True}


def _whole_file(root: Path, sid: str) -> dict[str, Any]:
    """Fixes subtract(), then a README line; the README edit wipes the file. Every hash
    agrees (recorded faithfully) and the tests pass: only the replay sees it."""
    readme = call(
        "replace_lines",
        "c4",
        path="README.md",
        start_line=3,
        end_line=3,
        expected="A tiny calculator.\n",
        replacement="A tiny calculator, with tests.\n",
    )

    def replace_lines(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
        bug = _as_whole_file if args["path"] == "README.md" else DEFAULT_TOOLS["replace_lines"]
        return bug(root, args)

    turns = [*_fix()[:3], model_turn(readme), _fix()[3]]
    tools: dict[str, Tool] = {**TOOLS, "replace_lines": replace_lines}
    session = run_session(root, sid, TASK + " Document.", ScriptedModel(turns), tools=tools)
    agent_git(root, "add", "-A")
    agent_git(root, "commit", "-q", "-m", "agent: fix subtract, document")
    session.head_commit = agent_git(root, "rev-parse", "HEAD").decode().strip()
    return session.report()


SCENARIOS = [
    Scenario("demo-01-delivered", "clean delivery", _delivered),
    Scenario("demo-02-change-missing", "new file left out of the commit", _missing_file),
    Scenario("demo-03-wrong-range", "replace applied one line early", _wrong_range),
    Scenario("demo-04-tests-fail", "fix that breaks the tests", _tests_fail),
    Scenario("demo-05-audit-gap", "audit record of the edit missing", _audit_gap),
    Scenario("demo-06-undeclared", "formatter changed another file", _undeclared),
    Scenario("demo-07-out-of-turns", "ran out of turns", _out_of_turns),
    Scenario("demo-08-whole-file", "bounded replace done as a whole-file write", _whole_file),
    # Last: its work stays in the working tree, which the scenarios built after it would use.
    Scenario("demo-09-worktree-fr", "uncommitted work, French harness", _worktree_fr),
]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


MARKER = ".verifier-demo"


def prepare(workdir: Path) -> None:
    """Make `workdir` the demo's own: new, empty, or made by an earlier demo.

    The demo deletes and rewrites what it made; a folder it did not make is
    refused rather than overwritten.
    """
    if workdir.exists() and not workdir.is_dir():
        raise ConfigError(f"demo --dir: {str(workdir)!r} is not a folder")
    if workdir.is_dir() and any(workdir.iterdir()) and not (workdir / MARKER).is_file():
        raise ConfigError(
            f"demo --dir: {str(workdir)!r} is not empty and was not made by the demo; "
            "name a new folder"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("made by `verifier demo`; it may rewrite this folder\n")


def build(workdir: Path) -> tuple[Path, list[Path]]:
    """Create the sample repository and one report per scenario; return the config and reports."""
    prepare(workdir)
    repo = workdir / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    agent_git(repo, "init", "-q", "-b", "main")
    for rel, text in BASE_FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    agent_git(repo, "add", "-A")
    agent_git(repo, "commit", "-q", "-m", "calc: add, subtract, multiply")
    base = agent_git(repo, "rev-parse", "HEAD").decode().strip()
    reports_dir = workdir / "reports"
    reports_dir.mkdir(exist_ok=True)
    paths = []
    for scenario in SCENARIOS:
        agent_git(repo, "checkout", "-q", "--detach", base)
        agent_git(repo, "clean", "-q", "-fdx")
        report = scenario.build(repo, scenario.session_id)
        path = reports_dir / f"{scenario.session_id}.json"
        path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(path)
    config = workdir / "verifier.toml"
    config.write_text(
        "# The demo's own configuration: its store lives in this folder, never the user's.\n"
        "[verifier]\n"
        'database_url = "sqlite:///verifier.sqlite3"\n'
        "test_timeout = 120\n\n"
        "[repositories.calc]\n"
        'path = "repo"\n'
        'test_command = ["{python}", "-m", "pytest", "-q"]\n',
        encoding="utf-8",
    )
    return config, paths


def demo_config(config_path: Path) -> Config:
    """The demo's configuration; the environment's database is ignored on purpose."""
    config = Config.load(config_path, environ={})
    return replace(config, database_url=f"sqlite:///{config_path.parent / 'verifier.sqlite3'}")


def run(workdir: Path, fmt: str = "text") -> list[Verification]:
    """Build, verify, store, and print the table and the two rates."""
    say = render.progress_printer()
    say(f"building the sample repository and {len(SCENARIOS)} sessions in {workdir}/")
    config_path, reports = build(workdir.resolve())
    config = demo_config(config_path)
    verifications: list[Verification] = []
    for path in reports:
        say(f"verifying {path.stem}")
        try:
            outcome = verify_report(path.read_bytes(), config, source=str(path))
        except SessionConflict as exc:
            raise ConfigError(
                f"{exc}: this demo folder holds a store from another version of the demo; "
                "remove it or name a new folder"
            ) from None
        verifications.append(outcome.verification)
    rates = _rates(verifications)
    if fmt == "json":
        sys.stdout.write(
            render.dumps({"sessions": [v.to_dict() for v in verifications], "rates": rates})
        )
        return verifications
    console, out = render._console()
    table = render.sessions_table()
    for v in verifications:
        table.add_row(
            *render.session_row(
                v.session_id, v.agent_status, v.done, v.delivery_status.value, v.first_finding
            )
        )
    console.print(table)
    console.print(
        f"done rate      [bold]{rates['done_rate']:.0%}[/bold] "
        f"({rates['done']} of {rates['sessions']})"
    )
    console.print(
        f"delivered rate [bold]{rates['delivered_rate']:.0%}[/bold] "
        f"({rates['delivered']} of {rates['sessions']})"
    )
    rel = os.path.relpath(workdir)
    command = os.path.relpath(Path(sys.executable).with_name("verifier"))
    console.print(
        f"[dim]stored in {rel}/verifier.sqlite3; try: {command} verify "
        f"{rel}/reports/{reports[2].name} --config {rel}/verifier.toml[/dim]",
        soft_wrap=True,
    )
    sys.stdout.write(out.getvalue())
    return verifications


def _rates(verifications: list[Verification]) -> dict[str, Any]:
    n = len(verifications) or 1
    done = sum(v.done for v in verifications)
    delivered = sum(v.delivery_status is DeliveryStatus.DELIVERED for v in verifications)
    return {
        "sessions": len(verifications),
        "done": done,
        "delivered": delivered,
        "done_rate": done / n,
        "delivered_rate": delivered / n,
    }
