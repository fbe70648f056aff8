"""A reference harness: a manual tool-calling loop that writes a session report.

It drives a model (here a `ScriptedModel` that replays recorded turns, since
the Gemini API cannot run in tests) against a real repository working tree,
executes the `default` profile's tools, keeps the hash-chained audit trail as
it goes, and builds the report of the contract. The demo and the tests build
their sessions with it, so every report they verify was produced the way a
harness produces one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from google.genai import types

from audit import jcs_sha256, seal
from verifier.paths import UnsafeFile, hash_in_root
from verifier.repository import Repository

Tool = Callable[[Path, Mapping[str, Any]], dict[str, Any]]


class ScriptedModel:
    """Replays recorded model turns in order, in place of the Gemini API."""

    def __init__(self, turns: Iterable[types.Content]) -> None:
        self._turns = list(turns)

    def generate(self, history: Sequence[types.Content]) -> types.Content:
        if not self._turns:
            return types.Content(role="model", parts=[types.Part(text="I am out of turns.")])
        return self._turns.pop(0)


def call(name: str, call_id: str | None = None, **args: Any) -> types.Part:
    """A function_call part, as the model would send it."""
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))


def model_turn(*parts: types.Part | str) -> types.Content:
    return types.Content(
        role="model", parts=[types.Part(text=p) if isinstance(p, str) else p for p in parts]
    )


# -- the default profile's tools, executed for real on the working tree ----------------


def _target(root: Path, rel: str) -> Path:
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise PermissionError(f"{rel!r} is outside the repository")
    return path


def _read_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"output": _target(root, args["path"]).read_text(encoding="utf-8")}


def _write_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    path = _target(root, args["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(str(args["content"]).encode("utf-8"))
    return {"ok": True}


def _replace_lines(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    path = _target(root, args["path"])
    lines = path.read_bytes().decode("utf-8").splitlines(keepends=True)
    start, end = int(args["start_line"]), int(args["end_line"])
    if "".join(lines[start - 1 : end]) != args["expected"]:
        return {"ok": False, "error": "expected text does not match the lines"}
    lines[start - 1 : end] = [args["replacement"]]
    path.write_bytes("".join(lines).encode("utf-8"))
    return {"ok": True}


def _edit_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    path = _target(root, args["path"])
    text = path.read_text(encoding="utf-8")
    if text.count(args["old_text"]) != 1:
        return {"ok": False, "error": "old_text must occur exactly once"}
    path.write_text(text.replace(args["old_text"], args["new_text"]), encoding="utf-8")
    return {"ok": True}


def _delete_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    _target(root, args["path"]).unlink()
    return {"ok": True}


def _list_files(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"files": sorted(_visible_files(root))}


def _run_command(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    argv = args["command"] if isinstance(args["command"], list) else str(args["command"]).split()
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=120, check=False)
    return {"exit_code": done.returncode, "output": (done.stdout + done.stderr)[-4000:]}


DEFAULT_TOOLS: dict[str, Tool] = {
    "read_file": _read_file,
    "write_file": _write_file,
    "replace_lines": _replace_lines,
    "edit_file": _edit_file,
    "delete_file": _delete_file,
    "list_files": _list_files,
    "run_command": _run_command,
}


# -- the loop ----------------------------------------------------------------------------


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


def _visible_files(root: Path) -> list[str]:
    out = agent_git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]


class _Seen(NamedTuple):
    """A file as the harness sees it: SHA-256 of its bytes and its git mode."""

    sha256: str
    mode: str


def _hashes(root: Path) -> dict[str, _Seen]:
    """Every file git would see, hashed: the harness's view for effects.

    The bytes hashed are those git would store (the contract's rule): the raw
    bytes, or with CRLF made LF where the repository's ``text``/``eol``
    attributes ask for it. The mode is git's: executable when the owner may
    execute it, so that a ``chmod +x`` alone is an effect, which the verifier
    can hold against a claim.
    """
    visible = _visible_files(root)
    with Repository(root) as repo:
        conversions = repo.eol_conversions(set(visible))
    result = {}
    for rel in visible:
        path = root / rel
        if path.is_file() and not path.is_symlink():
            try:
                hashes = hash_in_root(root, rel, conversions.get(rel))
            except UnsafeFile:  # reached through a link: not a file of the repository
                continue
            if hashes is not None:
                digest = hashes.stored[0] if hashes.stored else hashes.sha256
                result[rel] = _Seen(digest, "100755" if hashes.executable else "100644")
    return result


def _effect(path: str, before: _Seen | None, after: _Seen | None) -> dict[str, Any]:
    """One effect; its modes only when the mode changed, so other effects read as they did."""
    effect: dict[str, Any] = {
        "path": path,
        "sha256_before": before and before.sha256,
        "sha256_after": after and after.sha256,
    }
    if before is not None and after is not None and before.mode != after.mode:
        effect["mode_before"], effect["mode_after"] = before.mode, after.mode
    return effect


@dataclass
class Session:
    """What one run of the loop produced; `report()` turns it into the contract's JSON."""

    session_id: str
    task: str
    base_commit: str
    contents: list[types.Content]
    bodies: list[dict[str, Any]]
    status: str
    started_at: datetime
    ended_at: datetime
    head_commit: str | None = None
    repo_name: str = "calc"
    extra: dict[str, Any] = field(default_factory=dict)

    def effects(self) -> dict[str, tuple[str | None, str | None]]:
        """Net effect per path of every recorded call, in order: (sha256 before, after)."""
        return {p: (net[0], net[1]) for p, net in self._net().items()}

    def _net(self) -> dict[str, tuple[str | None, str | None, str | None, str | None]]:
        """Net (sha256 before, after, mode before, mode after) per changed path.

        A mode is known where an effect recorded one (a call that changed it);
        the path changed when its bytes did, or its mode.
        """
        net: dict[str, list[str | None]] = {}
        for body in self.bodies:
            for e in body.get("effects", []):
                state = net.setdefault(e["path"], [e["sha256_before"], None, None, None])
                state[1] = e["sha256_after"]
                if "mode_before" in e:
                    state[2] = state[2] or e["mode_before"]
                    state[3] = e["mode_after"]
        return {
            p: (s[0], s[1], s[2], s[3])
            for p, s in net.items()
            if s[0] != s[1] or (s[2] is not None and s[2] != s[3])
        }

    def claims(self) -> list[dict[str, Any]]:
        """What an honest agent claims: exactly the net effects, modes where they changed."""
        out = []
        for path, (before, after, mode_before, mode_after) in sorted(self._net().items()):
            action = "create" if before is None else "delete" if after is None else "modify"
            claim: dict[str, Any] = {
                "path": path,
                "action": action,
                "sha256_before": before,
                "sha256_after": after,
            }
            if mode_before is not None and mode_before != mode_after:
                # A create has no mode before, a delete none after (the contract's rule).
                if before is not None:
                    claim["mode_before"] = mode_before
                if after is not None:
                    claim["mode_after"] = mode_after
            out.append(claim)
        return out

    def report(
        self,
        *,
        claims: list[dict[str, Any]] | None = None,
        bodies: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The session report v1; `claims` and `bodies` override what was recorded."""
        entries = seal(self.session_id, bodies if bodies is not None else self.bodies)
        calls = sum(1 for b in self.bodies if b["kind"] == "tool_call")
        final = next((p.text for p in reversed(self.contents[-1].parts or []) if p.text), None)
        return {
            "schema_version": "1",
            "session_id": self.session_id,
            "agent": {
                "name": "demo-agent",
                "version": "0.3.0",
                "model": "gemini-3.5-flash",
                "tool_profile": "default",
            },
            "task": self.task,
            "repo": {
                "name": self.repo_name,
                "base_commit": self.base_commit,
                "head_commit": self.head_commit,
                "branch": f"agent/{self.session_id}",
            },
            "started_at": _ts(self.started_at),
            "ended_at": _ts(self.ended_at),
            "status": self.status,
            "final_text": final,
            "usage": {
                "turns": sum(1 for c in self.contents if c.role == "model"),
                "tool_calls": calls,
            },
            "changes": self.claims() if claims is None else claims,
            "trajectory": {
                "format": "gemini-contents",
                "contents": [c.model_dump(mode="json", exclude_none=True) for c in self.contents],
            },
            "audit": {
                "entries": entries,
                "count": len(entries),
                "head": entries[-1]["hash"] if entries else None,
            },
            **self.extra,
        }


def run_session(
    root: Path,
    session_id: str,
    task: str,
    model: ScriptedModel,
    *,
    tools: Mapping[str, Tool] = DEFAULT_TOOLS,
    max_turns: int = 20,
    commit: bool = False,
    status_when_done: str = "done",
    start: datetime = datetime(2026, 11, 29, 10, 0, tzinfo=UTC),
) -> Session:
    """Run the loop until the model answers with text (or turns run out)."""
    clock = iter(start + timedelta(seconds=s) for s in range(10_000))
    base = agent_git(root, "rev-parse", "HEAD").decode().strip()
    started = next(clock)
    contents = [types.Content(role="user", parts=[types.Part(text=task)])]
    bodies: list[dict[str, Any]] = [{"kind": "session_start", "ts": _ts(started)}]
    status = "turns_exhausted"
    for _ in range(max_turns):
        turn = model.generate(contents)
        contents.append(turn)
        i = len(contents) - 1
        calls = [(j, p.function_call) for j, p in enumerate(turn.parts or []) if p.function_call]
        if not calls:
            status = status_when_done
            break
        responses = []
        for j, fc in calls:
            name, args = fc.name or "", dict(fc.args or {})
            before = _hashes(root)
            try:
                tool = tools[name]
                response = tool(root, args)
            except KeyError:
                response = {"ok": False, "error": f"unknown tool {name!r}"}
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                response = {"ok": False, "error": str(exc)}
            after = _hashes(root)
            effects = [
                _effect(p, before.get(p), after.get(p))
                for p in sorted(set(before) | set(after))
                if before.get(p) != after.get(p)
            ]
            bodies.append(
                {
                    "kind": "tool_call",
                    "ts": _ts(next(clock)),
                    "call_id": fc.id or f"t{i}.p{j}",
                    "tool": name,
                    "args_sha256": jcs_sha256(args),
                    "decision": "allow",
                    "checkpoint": None,
                    "result_sha256": jcs_sha256(response),
                    "effects": effects,
                }
            )
            responses.append(
                types.Part(
                    function_response=types.FunctionResponse(id=fc.id, name=name, response=response)
                )
            )
        contents.append(types.Content(role="user", parts=responses))
    ended = next(clock)
    bodies.append({"kind": "session_end", "ts": _ts(ended), "status": status})
    head = None
    if commit:
        agent_git(root, "add", "-A")
        agent_git(root, "commit", "-q", "--allow-empty", "-m", f"agent: {task}")
        head = agent_git(root, "rev-parse", "HEAD").decode().strip()
    return Session(session_id, task, base, contents, bodies, status, started, ended, head)


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
