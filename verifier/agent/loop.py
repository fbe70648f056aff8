"""The agent's loop on the recorder: ask the model, execute or deny each call, answer.

One turn: the model gets the history (`Recorder.contents`) and the tools'
declarations, with automatic function calling disabled; the recorder records
its reply as returned; each call is then, in order,

1. denied when the session must stop (a loop, the token budget, the time),
2. denied when the permission policy refuses it (a command off the allow-list),
3. denied when no tool has its name,
4. otherwise executed, a checkpoint of the working tree taken first when it
   may write, its output truncated to 4,000 characters; the recorder writes
   the entry (effects included) before the response goes back.

The loop ends with the status it really reached (the contract's vocabulary):
``done`` when the model answers without a call, ``turns_exhausted`` after
`SessionLimits.max_turns` replies, ``budget_exhausted`` once the tokens used pass
`SessionLimits.token_budget`, ``timeout`` past `SessionLimits.max_seconds`,
``loop_detected`` at the third identical call in a row, ``error`` when the
model cannot be reached or replies with no content. A call stopped by one of these is denied, so the
trail still holds one entry per call the model made.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from google.genai import types

from audit.jcs import jcs_sha256
from audit.recorder import PendingCall, Recorder
from verifier import resources
from verifier.agent import tools as toolbox
from verifier.agent.model import Model
from verifier.contract.profiles import Profile, load_profile
from verifier.errors import InfrastructureError

log = logging.getLogger(__name__)

MAX_TURNS = 25
LOOP_REPEATS = 3
#: Tools that only read: no checkpoint before them.
READ_ONLY = frozenset({"read_file", "list_files", "search"})
SYSTEM = (
    "You are a coding agent working in a git repository through the tools given. "
    "Read before you edit; prefer replace_lines with the exact expected text; "
    "run the tests before you finish, and end with a short summary of what you changed."
)


@dataclass(frozen=True)
class SessionLimits:
    """How far one session may run: the turns, tokens and seconds past which the loop stops."""

    max_turns: int = MAX_TURNS
    token_budget: int | None = None  # prompt plus output tokens (thoughts included)
    max_seconds: float | None = None


@dataclass(frozen=True)
class Ending:
    """How the loop ended: the contract's status, and why in words."""

    status: str
    reason: str


@dataclass(frozen=True)
class Loop:
    """One agent: a model, its tools, its limits and its policy, run on a recorder."""

    model: Model
    tools: Mapping[str, toolbox.Tool] = field(default_factory=lambda: dict(toolbox.DEFAULT_TOOLS))
    limits: SessionLimits = SessionLimits()
    policy: toolbox.Policy = field(default_factory=toolbox.Policy)
    output_limit: int = toolbox.OUTPUT_LIMIT
    clock: Callable[[], float] = time.monotonic
    system_instruction: str | None = SYSTEM

    def run(self, rec: Recorder) -> Ending:
        """Drive the session recorded by `rec` until a stop; `rec.finish` is the caller's."""
        config = self.config()
        started = self.clock()
        repeats: list[str] = []
        for _ in range(self.limits.max_turns):
            if self._timed_out(started):
                return Ending("timeout", f"{self.limits.max_seconds} s have passed")
            try:
                response = self.model.generate(rec.contents, config)
            except InfrastructureError as exc:
                log.warning("the model could not answer: %s", exc)
                return Ending("error", str(exc))
            if not response.candidates or response.candidates[0].content is None:
                reason = response.candidates[0].finish_reason if response.candidates else None
                return Ending("error", f"got a reply with no content (finish reason {reason})")
            calls = rec.reply(response)
            if not calls:
                return Ending("done", "the model answered without a call")
            ending = self._over_budget(rec)
            for call in calls:
                if ending is None and self._timed_out(started):
                    ending = Ending("timeout", f"{self.limits.max_seconds} s have passed")
                if ending is None:
                    ending = _loop(repeats, call)
                if ending is not None:
                    rec.deny(call, {"error": f"not run: the session stops ({ending.reason})"})
                else:
                    self._dispatch(rec, call)
            rec.respond()
            if ending is not None:
                return ending
        return Ending("turns_exhausted", f"{self.limits.max_turns} turns used")

    def config(self) -> types.GenerateContentConfig:
        """The request's configuration: the declared tools, automatic calling off."""
        names = [n for n in self.tools if n in _default_profile().functions]
        return types.GenerateContentConfig(
            system_instruction=self.system_instruction,
            tools=[
                types.Tool(function_declarations=toolbox.declarations(_default_profile(), names))
            ],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )

    def _dispatch(self, rec: Recorder, call: PendingCall) -> None:
        refusal = self.policy.refusal(call.name, call.args)
        if refusal is not None:
            rec.deny(call, {"error": refusal})
            return
        tool = self.tools.get(call.name)
        if tool is None:
            rec.deny(
                call,
                {
                    "error": f"got unknown tool {call.name!r}, expected one of "
                    f"{', '.join(sorted(self.tools))}"
                },
            )
            return
        path = call.args.get("path")
        # The reference file tools touch their `path` alone; any other tool (a command, a
        # harness's own) is watched over the whole tree, so what it did is what is recorded.
        scope: list[str] | None = None
        if toolbox.DEFAULT_TOOLS.get(call.name) is tool and call.name in ("list_files", "search"):
            scope = []  # ours, and they only read: nothing to watch
        elif isinstance(path, str) and toolbox.SCOPED.get(call.name) is tool:
            scope = [path]
        checkpoint = None if call.name in READ_ONLY else toolbox.checkpoint(rec.root)
        rec.execute(
            call,
            partial(_truncated, tool, rec.root, self.output_limit),
            paths=scope,
            checkpoint=checkpoint,
        )

    def _over_budget(self, rec: Recorder) -> Ending | None:
        budget = self.limits.token_budget
        if budget is None:
            return None
        usage = rec.usage()
        used = usage.prompt_tokens + usage.output_tokens
        if used <= budget:
            return None
        return Ending("budget_exhausted", f"got {used} tokens used, budget {budget}")

    def _timed_out(self, started: float) -> bool:
        limit = self.limits.max_seconds
        return limit is not None and self.clock() - started >= limit


def _loop(repeats: list[str], call: PendingCall) -> Ending | None:
    """The third identical call in a row (same tool, same arguments) is a loop."""
    repeats.append(f"{call.name}:{jcs_sha256(call.args)}")
    if len(repeats) >= LOOP_REPEATS and len(set(repeats[-LOOP_REPEATS:])) == 1:
        return Ending("loop_detected", f"{call.name} called {LOOP_REPEATS} times in a row alike")
    return None


def _truncated(tool: toolbox.Tool, root: Path, limit: int, args: Mapping[str, Any]) -> Any:
    response = tool(root, args)
    return toolbox.truncate(response, limit) if isinstance(response, dict) else response


@functools.cache
def _default_profile() -> Profile:
    return load_profile(resources.profiles_dir(), "default")
