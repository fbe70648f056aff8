"""The reference harness: the reference agent (`verifier.agent`) run on the recorder.

`run_session` opens a recorder (`audit.recorder`) on a repository's working
tree, runs the agent's loop with a model (the Gemini API, or a scripted model
replaying recorded turns), commits the work if asked, and finishes the
report: every report the demo and the tests verify is the recorder's, built
the way any harness embedding it builds one; nothing here writes the
contract's fields by hand.

A `Session` keeps that report. A faulty harness (the demo's, the tests')
edits what it recorded through it: `report(claims=...)` claims something
else, and `bodies` edited (an entry dropped after the recorder wrote it)
re-chains the trail the way such a harness would write it.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from audit import seal
from audit.recorder import Agent, Recorder, claims_from_effects
from verifier.agent.loop import Ending, Loop, SessionLimits
from verifier.agent.model import Model, ScriptedModel, call, model_turn
from verifier.agent.tools import DEFAULT_TOOLS, Policy, Tool

__all__ = [
    "DEFAULT_TOOLS",
    "Policy",
    "ScriptedModel",
    "Session",
    "SessionLimits",
    "Tool",
    "agent_git",
    "call",
    "model_turn",
    "run_session",
    "ticking",
]

START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
AGENT_NAME = "demo-agent"
AGENT_VERSION = "0.4.0"
#: The trail's entry fields the chain sets; the rest of an entry is its body.
_SEALED = ("v", "session_id", "seq", "prev", "hash")


def agent_git(root: Path, *args: str) -> bytes:
    """git as the agent runs it, with a fixed identity and date so commits reproduce."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "agent",
        "GIT_AUTHOR_EMAIL": "agent@example.invalid",
        "GIT_COMMITTER_NAME": "agent",
        "GIT_COMMITTER_EMAIL": "agent@example.invalid",
        "GIT_AUTHOR_DATE": "2026-11-29T10:00:00Z",
        "GIT_COMMITTER_DATE": "2026-11-29T10:00:00Z",
    }
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True).stdout


def ticking(start: datetime = START) -> Callable[[], datetime]:
    """A clock one second a reading: reports that reproduce byte for byte."""
    moments = (start + timedelta(seconds=s) for s in range(10_000_000))
    return lambda: next(moments)


@dataclass
class Session:
    """One recorded session: the recorder's report, and what a faulty harness may edit."""

    session_id: str
    recorded: dict[str, Any]
    ending: Ending
    trail: Path | None = None
    head_commit: str | None = None
    repo_name: str = field(init=False)
    bodies: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.head_commit = self.head_commit or self.recorded["repo"]["head_commit"]
        self.repo_name = self.recorded["repo"]["name"]
        self.bodies = [_body(e) for e in self.recorded["audit"]["entries"]]
        self._as_recorded = copy.deepcopy(self.bodies)

    @property
    def status(self) -> str:
        return str(self.recorded["status"])

    def claims(self) -> list[dict[str, Any]]:
        """What an honest agent claims: the composed effects of its trail."""
        return claims_from_effects(e for b in self.bodies for e in b.get("effects", ()))

    def report(
        self,
        *,
        claims: list[dict[str, Any]] | None = None,
        bodies: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The recorder's report; `claims`, `bodies` (or edits of `self.bodies`, `head_commit`,
        `session_id`, `repo_name`) replace what was recorded, as a faulty harness would."""
        report = copy.deepcopy(self.recorded)
        report["session_id"] = self.session_id
        report["repo"]["name"] = self.repo_name
        report["repo"]["head_commit"] = self.head_commit
        bodies = self.bodies if bodies is None else bodies
        if bodies != self._as_recorded or self.session_id != self.recorded["session_id"]:
            entries = seal(self.session_id, bodies)
            report["audit"] = {
                "entries": entries,
                "count": len(entries),
                "head": entries[-1]["hash"] if entries else None,
            }
        if claims is not None:
            report["changes"] = claims
        return report


def run_session(
    root: Path,
    session_id: str,
    task: str,
    model: Model,
    *,
    tools: Mapping[str, Tool] = DEFAULT_TOOLS,
    max_turns: int | None = None,
    limits: SessionLimits | None = None,
    policy: Policy | None = None,
    commit: bool = False,
    status_when_done: str = "done",
    start: datetime = START,
    clock: Callable[[], datetime] | None = None,
    elapsed: Callable[[], float] | None = None,
    trail: Path | None = None,
    repo_name: str = "calc",
) -> Session:
    """Record one session of `model` working on `task` in the working tree `root`.

    `max_turns` (or `limits`) bounds the loop; `commit` commits the work before
    the report is finished (its head is the report's), otherwise the work stays
    in the working tree. `status_when_done` is the word the harness uses for
    ``done`` (``terminé`` for a French one). `start` or `clock` gives the
    trail's times, `elapsed` the loop's seconds. The trail is written to
    `trail`, or to a temporary file removed once the report is made;
    `repo_name` is the repository's name in the verifier's configuration.
    """
    limits = limits or SessionLimits()
    if max_turns is not None:
        limits = dataclasses.replace(limits, max_turns=max_turns)
    loop = Loop(
        model,
        tools=dict(tools),
        limits=limits,
        policy=policy or Policy(),
        clock=elapsed or time.monotonic,
    )
    with tempfile.TemporaryDirectory(prefix="verifier-trail-") as scratch:
        path = trail or Path(scratch) / f"{session_id}.jsonl"
        rec = Recorder.open(
            root,
            session_id=session_id,
            agent=Agent(AGENT_NAME, version=AGENT_VERSION, model=model.name),
            repo_name=repo_name,
            trail=path,
            task=task,
            branch=f"agent/{session_id}",
            clock=clock or ticking(start),
        )
        try:
            ending = loop.run(rec)
            head = None
            if commit:
                agent_git(root, "add", "-A")
                agent_git(root, "commit", "-q", "--allow-empty", "-m", f"agent: {task}")
                head = agent_git(root, "rev-parse", "HEAD").decode().strip()
            status = status_when_done if ending.status == "done" else ending.status
            report = rec.finish(status, head_commit=head)
        finally:
            rec.close()
    return Session(session_id, report, ending, trail)


def _body(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in entry.items() if k not in _SEALED}
