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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from audit import canonicalize
from audit.recorder import dumps
from verifier.agent.harness import (
    DEFAULT_TOOLS,
    ScriptedModel,
    Tool,
    agent_git,
    call,
    model_turn,
    run_session,
)
from verifier.agent.loop import SessionLimits
from verifier.agent.model import Model
from verifier.agent.tools import command_argv
from verifier.app.pipeline import verify_report
from verifier.config import Config
from verifier.demo import page
from verifier.errors import ConfigError, SessionConflict
from verifier.findings import DeliveryStatus, Verification
from verifier.formats import render

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
#: A live session's bounds: the loop's turns, a token budget, a wall-clock limit.
LIVE_LIMITS = SessionLimits(max_turns=25, token_budget=400_000, max_seconds=300)


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
    """One sample session: its id, what goes wrong, its task, and the harness that runs it.

    `build` runs the session (working tree, id, task, trail's path) and returns the
    report; a silent failure's harness has a faulty tool or edits what it
    recorded, as a buggy harness would, and records faithfully what it did.
    """

    session_id: str
    story: str
    task: str
    build: Callable[[Path, str, str, Path], dict[str, Any]]


def _run_command(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """run_command as the demo's harness runs it: `python` is this interpreter, and the
    output carries no durations, so the reports are the same on every machine and run."""
    argv = [sys.executable if a == "python" else a for a in command_argv(args)]
    response = DEFAULT_TOOLS["run_command"](root, {**args, "command": argv})
    response["output"] = re.sub(r" in \d+\.\d+s\b", "", response["output"])
    return response


TOOLS: dict[str, Tool] = {**DEFAULT_TOOLS, "run_command": _run_command}


def _delivered(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
    model = ScriptedModel(_fix())
    return run_session(root, sid, task, model, commit=True, tools=TOOLS, trail=trail).report()


def _missing_file(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
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
    session = run_session(root, sid, task, ScriptedModel(turns), trail=trail)
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


def _wrong_range(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
    tools: dict[str, Tool] = {**TOOLS, "replace_lines": _off_by_one}
    model = ScriptedModel(_fix()[:2] + _fix()[3:])
    session = run_session(root, sid, task, model, tools=tools, commit=True, trail=trail)
    # The agent claims the file it meant to write: the fix on line 6.
    intended = CALC.replace("def subtract(a, b):\n" + BUGGY, "def subtract(a, b):\n" + FIXED)
    claims = session.claims()
    claims[0]["sha256_after"] = _sha256(intended.encode())
    return session.report(claims=claims)


def _tests_fail(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
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
    return run_session(root, sid, task, ScriptedModel(turns), commit=True, trail=trail).report()


def _audit_gap(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
    """The harness loses the log record of the edit after the recorder wrote it: it rewrites
    the trail file without that entry, re-chained, so the chain alone looks sound."""
    model = ScriptedModel(_fix())
    session = run_session(root, sid, task, model, commit=True, tools=TOOLS, trail=trail)
    session.bodies = [b for b in session.bodies if b.get("call_id") != "c2"]
    report = session.report()
    trail.write_bytes(b"".join(canonicalize(e) + b"\n" for e in report["audit"]["entries"]))
    return report


def _undeclared(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
    """A formatter run rewrote README.md; the agent claims only calc.py."""
    fmt = ["python", "-c", "open('README.md', 'a').write('Formatted.\\n')"]
    turns = [*_fix()[:2], model_turn(call("run_command", "c5", command=fmt)), _fix()[3]]
    model = ScriptedModel(turns)
    session = run_session(root, sid, task, model, commit=True, tools=TOOLS, trail=trail)
    claims = [c for c in session.claims() if c["path"] == "calc.py"]
    return session.report(claims=claims)


def _out_of_turns(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
    """Reads calc.py and runs out of turns (two here) before any fix."""
    turns = [model_turn(call("read_file", None, path="calc.py")) for _ in range(3)]
    model = ScriptedModel(turns)
    return run_session(root, sid, task, model, max_turns=2, commit=True, trail=trail).report()


def _worktree_fr(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
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
    model = ScriptedModel(turns)
    return run_session(root, sid, task, model, status_when_done="terminé", trail=trail).report()


def _as_whole_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """A dispatcher still on the old vocabulary: a bounded replace becomes write_file."""
    (root / args["path"]).write_text(str(args["replacement"]), encoding="utf-8")
    return {"ok": True}


def _whole_file(root: Path, sid: str, task: str, trail: Path) -> dict[str, Any]:
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
    model = ScriptedModel(turns)
    session = run_session(root, sid, task, model, tools=tools, trail=trail)
    agent_git(root, "add", "-A")
    agent_git(root, "commit", "-q", "-m", "agent: fix subtract, document")
    session.head_commit = agent_git(root, "rev-parse", "HEAD").decode().strip()
    return session.report()


SCENARIOS = [
    Scenario("demo-01-delivered", "clean delivery", TASK, _delivered),
    Scenario(
        "demo-02-change-missing",
        "new file left out of the commit",
        TASK + " Add a test.",
        _missing_file,
    ),
    Scenario("demo-03-wrong-range", "replace applied one line early", TASK, _wrong_range),
    Scenario("demo-04-tests-fail", "fix that breaks the tests", TASK, _tests_fail),
    Scenario("demo-05-audit-gap", "audit record of the edit missing", TASK, _audit_gap),
    Scenario(
        "demo-06-undeclared",
        "formatter changed another file",
        TASK + " Format README.md.",
        _undeclared,
    ),
    Scenario("demo-07-out-of-turns", "ran out of turns", TASK, _out_of_turns),
    Scenario(
        "demo-08-whole-file",
        "bounded replace done as a whole-file write",
        TASK + " Document it in README.md.",
        _whole_file,
    ),
    # Last: its work stays in the working tree, which the scenarios built after it would use.
    Scenario(
        "demo-09-worktree-fr",
        "uncommitted work, French harness",
        "Corrige la soustraction.",
        _worktree_fr,
    ),
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


def sample_repository(workdir: Path) -> tuple[Path, str]:
    """The sample repository, made anew; its path and base commit."""
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
    return repo, agent_git(repo, "rev-parse", "HEAD").decode().strip()


Runner = Callable[[Scenario, Path, Path], tuple[str, dict[str, Any]]]


def build(workdir: Path, runner: Runner | None = None) -> tuple[Path, list[Path]]:
    """Create the sample repository and one report per scenario; return the config and reports.

    Each session starts from the base commit with a clean tree and writes its trail
    to ``trails/``; its report is written as the recorder's bytes to ``reports/``.
    `runner` runs a scenario (the scripted one by default; the live one calls Gemini).
    """
    prepare(workdir)
    repo, base = sample_repository(workdir)
    reports_dir, trails_dir = workdir / "reports", workdir / "trails"
    for folder in (reports_dir, trails_dir):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
    paths = []
    for scenario in SCENARIOS:
        agent_git(repo, "checkout", "-q", "--detach", base)
        agent_git(repo, "clean", "-q", "-fdx")
        session_id, report = (runner or _scripted)(scenario, repo, trails_dir)
        path = reports_dir / f"{session_id}.json"
        path.write_bytes(dumps(report))
        paths.append(path)
    config = workdir / "verifier.toml"
    database_url = f"sqlite:///{workdir / 'verifier.sqlite3'}"
    config.write_text(
        "# The demo's own configuration: its store lives in this folder, never the user's.\n"
        "[verifier]\n"
        # Absolute: a command given --config from any folder reads the demo's store.
        f"database_url = {json.dumps(database_url)}\n"
        "test_timeout = 120\n\n"
        # The evidence key too, so the tour's `keys create` writes here, never into ~.
        "[evidence]\n"
        f"signing_key = {json.dumps(str(workdir / 'evidence-signing-key.pem'))}\n\n"
        "[repositories.calc]\n"
        'path = "repo"\n'
        'test_command = ["{python}", "-m", "pytest", "-q"]\n',
        encoding="utf-8",
    )
    return config, paths


def _scripted(scenario: Scenario, repo: Path, trails: Path) -> tuple[str, dict[str, Any]]:
    sid = scenario.session_id
    return sid, scenario.build(repo, sid, scenario.task, trails / f"{sid}.jsonl")


def live_runner(model: Model, now: datetime | None = None) -> Runner:
    """Each scenario's task, done honestly (the reference tools, no fault) by `model`.

    Session ids carry the time of the run, so a second live run adds sessions.
    """
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")

    def run(scenario: Scenario, repo: Path, trails: Path) -> tuple[str, dict[str, Any]]:
        sid = f"live-{stamp}-{scenario.session_id.removeprefix('demo-')}"
        session = run_session(
            repo,
            sid,
            scenario.task,
            model,
            tools=TOOLS,
            limits=LIVE_LIMITS,
            commit=True,
            clock=lambda: datetime.now(UTC),
            trail=trails / f"{sid}.jsonl",
        )
        return sid, session.report()

    return run


def demo_config(config_path: Path) -> Config:
    """The demo's configuration; the environment's database is ignored on purpose."""
    config = Config.load(config_path, environ={})
    return replace(config, database_url=f"sqlite:///{config_path.parent / 'verifier.sqlite3'}")


def _progress(line: str) -> None:
    print(render.progress_line(line), file=sys.stderr, flush=True)


def run(
    workdir: Path,
    fmt: str = "text",
    model: Model | None = None,
    progress: Callable[[str], None] = _progress,
) -> list[Verification]:
    """Build, verify, store, print the table and the two rates, and write the HTML page.

    With `model` (the Gemini API, `verifier demo --live`) the sessions are that
    model's, on each scenario's task with the reference tools. `progress` is told of
    each step.
    """
    say = progress
    kind = "live" if model is not None else "scripted"
    say(f"building the sample repository and {len(SCENARIOS)} {kind} sessions in {workdir}/")
    workdir = workdir.resolve()
    config_path, reports = build(workdir, None if model is None else live_runner(model))
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
    rates = rates_of(verifications)
    stories = {s.session_id: s.story for s in SCENARIOS}
    rel = os.path.relpath(workdir)
    command = os.path.relpath(Path(sys.executable).with_name("verifier"))
    cfg = f"--config {rel}/verifier.toml"
    browse = [
        f"{command} token create --scope read --name demo {cfg}   (prints a token)",
        f"{command} serve {cfg}",
        "then open http://127.0.0.1:8080/ and paste the token",
    ]
    (workdir / "index.html").write_text(
        page.render(verifications, rates, stories, browse), encoding="utf-8"
    )
    if fmt == "json":
        sys.stdout.write(
            render.dumps({"sessions": [v.to_dict() for v in verifications], "rates": rates})
        )
        return verifications
    text = render.demo_text(
        verifications,
        rates,
        store=f"{rel}/verifier.sqlite3",
        example=f"{command} verify {rel}/reports/{reports[2].name} {cfg}",
        page=f"{rel}/index.html",
        browse=browse,
    )
    sys.stdout.write(text)
    return verifications


def rates_of(verifications: list[Verification]) -> dict[str, Any]:
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
