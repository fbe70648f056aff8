"""The gemini-cli hook: our recorder, run by gemini-cli once per event of a session.

``verifier gemini-cli install`` has gemini-cli run ``python -I -m
audit.geminicli.hook`` for each event; the event comes as JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and for the
tool events ``tool_name``, ``tool_input``), the answer goes as JSON on stdout,
and it is always ``{}``: the hook observes, it never steers (no decision, no
changed input, exit 0 even when it fails, its failure then written to
``hook-errors.log`` and seen by the verifier as a missing entry).

Everything is kept under the repository's git directory, never in the work
tree: ``<git-dir>/verifier/<session-id>/`` holds ``trail.jsonl`` (the hash
chain, as `audit.recorder` writes it: one JCS line per entry, fsynced),
``state.json`` (what one event hands the next), ``lock`` (events of one session
take turns: gemini-cli runs the hooks of parallel calls at once), and at the end
``report.json`` and ``transcript.jsonl`` (and ``verdict.json``, ``verifier verify``'s
answer, with ``install --verify``). The events:

1. ``SessionStart``: the ``session_start`` entry, the base commit (HEAD); the
   sessions of this repository whose end was never seen are finished first
   (their report says so and their trail stays unfinished);
2. ``BeforeTool``: the files the call may touch, as git would see them: the
   named file for ``write_file`` and ``replace``; nothing for the tools that
   only read; the whole tree (with the hash cache kept across events) for a
   shell command, an MCP tool and any tool this release does not name;
3. ``AfterTool``: the same files again; the difference is the call's effects,
   kept as an observation, fsynced before gemini-cli hands the response back;
4. ``BeforeModel``: tool hooks carry no call id, so the calls are matched here
   to the transcript (which holds them, with their ids and the responses the
   model is about to get): one ``tool_call`` entry per call, by tool name and
   arguments in order; a call of the transcript that fired no tool hook was
   refused by gemini-cli before it ran (``refused``, no effects);
5. ``BeforeAgent``: a prompt (a session may have several, in interactive or ACP
   mode); ``AfterAgent``: the agent answered it, the last calls are written;
6. ``SessionEnd``: the last calls, ``session_end`` and the report: status ``done``
   when the last prompt was answered (``AfterAgent`` after its ``BeforeAgent``),
   else ``error`` when it ended on ``exit`` (as when the model failed) and
   ``cancelled`` otherwise.

The report is the contract's v1 (`audit.recorder`'s shape): the trajectory is
the transcript's history (`audit.geminicli.transcript`), the claims come from
the effects, the head is the commit when the session committed past the base
and left a clean tree, else the working tree; usage is the transcript's token
counts. A tool event imports little (see below): the hook's start is the cost of every
tool call.

With ``install --server URL --token-env VAR [--key PATH]`` (`audit.geminicli.server`),
each entry goes to the service's witness once it is fsynced, and the report is signed
and posted; the token is read from ``$VAR`` at run time, and a failure is counted in
the report (``extensions.recorder.witness``, ``upload.json``), never stops the session.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit import _worktree
from audit.geminicli import server
from audit.geminicli.release import AGENT_NAME, RELEASE, tool_profile

if TYPE_CHECKING:
    from datetime import datetime

    from audit.geminicli.transcript import ToolCallRecord, Transcript

# The chain, JCS, the claims and the transcript reader are imported in the functions that
# write entries and the report, not here: a tool event (BeforeTool, AfterTool), the cost of
# every tool call, never needs them (docs/benchmarks.md, "hook").

__all__ = ["AGENT_NAME", "FILE_TOOLS", "READ_ONLY_TOOLS", "handle", "main", "tool_profile"]

#: The tools that write one file, and the argument naming it.
FILE_TOOLS = {"write_file": "file_path", "replace": "file_path"}
#: The tools of 0.61 that change no file of the repository (they read, search, ask, plan
#: in gemini-cli's own folders): no snapshot. Any other tool gets the whole tree.
READ_ONLY_TOOLS = frozenset(
    (
        "read_file",
        "read_many_files",
        "list_directory",
        "glob",
        "grep_search",
        "google_web_search",
        "web_fetch",
        "get_internal_docs",
        "activate_skill",
        "ask_user",
        "write_todos",
        "update_topic",
        "complete_task",
        "enter_plan_mode",
        "exit_plan_mode",
        "read_mcp_resource",
        "list_mcp_resources",
        "tracker_get_task",
        "tracker_list_tasks",
        "tracker_visualize",
    )
)
_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_STATE_VERSION = 1
# How long ``install --verify``'s verification may take before the hook gives up on it.
VERIFY_TIMEOUT_S = 900


class HookError(Exception):
    """What makes an event unrecordable (written to ``hook-errors.log``)."""


def main() -> int:
    """Read one event from stdin, record it, answer ``{}`` (or the verdict as a
    ``systemMessage``, see `handle`); exit 0 whatever happens."""
    raw = sys.stdin.buffer.read()
    event: Any = None
    answer: dict[str, str] = {}
    try:
        event = json.loads(raw)
        if not isinstance(event, dict):
            raise HookError(f"the event is a JSON {type(event).__name__}, expected an object")
        answer = handle(event)
    except Exception as exc:  # never break gemini-cli: the verifier sees the gap instead
        _complain(event, exc)
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


def handle(event: Mapping[str, Any], *, now: datetime | None = None) -> dict[str, str]:
    """Record one event (see the module's docstring); the answer to gemini-cli.

    The answer is empty, except at the end of a session when ``install --verify``
    asked for the verdict: then its ``systemMessage`` (shown to the gemini-cli
    user, it decides nothing) says done versus delivered and the first finding.
    """
    name = _str(event, "hook_event_name")
    session = _Session.of(event)
    if name == "SessionStart":
        session.finish_others()
    if name == "SessionEnd":
        session.finish_siblings(event.get("reason"), now)
        if not session.state_path.exists():
            return {}  # a session never seen before its end (ACP's own): nothing to record
    with session.locked():
        state = session.load()
        if state is None:
            state = session.start(event, now)
        elif name == "SessionStart":
            return {}  # a resumed session goes on with its trail
        if state.get("ended"):
            return {}  # finished (SessionEnd seen): nothing more to record
        if isinstance(event.get("transcript_path"), str) and event["transcript_path"]:
            state["transcript"] = event["transcript_path"]
        if name == "BeforeAgent":
            state["answered"] = False  # a prompt: the agent works on it until AfterAgent
        elif name == "BeforeTool":
            session.before_tool(state, event)
        elif name == "AfterTool":
            session.after_tool(state, event)
        elif name == "BeforeModel":
            session.flush(state, now)
        elif name == "AfterAgent":
            session.flush(state, now)  # the last turn's calls, before another prompt comes
            state["answered"] = True
        elif name == "SessionEnd":
            reason = event.get("reason")
            status = "done" if state.get("answered") else _unanswered(reason)
            session.end(state, status, f"session_end:{reason}", now)
        session.save(state)
    if name == "SessionEnd" and state.get("ended"):
        return session.verdict(state)
    return {}


class _Session:
    """One session's folder under the git directory, and what each event does to it."""

    def __init__(self, root: Path, git_dir: Path, session_id: str, cwd: Path) -> None:
        self.root = root
        self.git_dir = git_dir
        self.session_id = session_id
        self.cwd = cwd
        self.folder = git_dir / "verifier" / session_id
        self.trail = self.folder / "trail.jsonl"
        self.state_path = self.folder / "state.json"
        self.witness_down = False  # a witness post failed in this event: no more tries

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> _Session:
        session_id = _str(event, "session_id")
        if not _SESSION_ID.fullmatch(session_id):
            raise HookError(f"session_id: got {session_id!r}, expected [A-Za-z0-9._:-]{{1,128}}")
        cwd = Path(_str(event, "cwd"))
        root, git_dir = _repository(cwd)
        return cls(root, git_dir, session_id, cwd)

    # -- state --------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Any:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def load(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self.state_path.read_bytes())
        except FileNotFoundError:
            return None
        if not isinstance(state, dict) or state.get("v") != _STATE_VERSION:
            raise HookError(f"{self.state_path}: not a state of this hook")
        return state

    def save(self, state: Mapping[str, Any]) -> None:
        _write_durably(self.state_path, json.dumps(state).encode())

    # -- the events ---------------------------------------------------------------------

    def start(self, event: Mapping[str, Any], now: datetime | None) -> dict[str, Any]:
        from audit.chain import genesis

        base = _worktree.git(self.root, "rev-parse", "HEAD").decode("ascii").strip()
        settings = _read_json(self.git_dir / "verifier" / "hook.json")
        state: dict[str, Any] = {
            "v": _STATE_VERSION,
            "session_id": self.session_id,
            "root": str(self.root),
            "base_commit": base,
            "transcript": event.get("transcript_path"),
            "repo_name": settings.get("repo_name") or self.root.name,
            "seq": 0,
            "prev": genesis(self.session_id),
            "last_ts": None,
            "started_at": None,
            "recorded": [],
            "observed": [],
            "pending": [],
            "next": 0,
            "ended": None,
            "agent": _agent_process(),
            **server.start(settings),
        }
        entry = self._append(state, {"kind": "session_start"}, now)
        state["started_at"] = entry["ts"]
        return state

    def before_tool(self, state: dict[str, Any], event: Mapping[str, Any]) -> None:
        tool = _str(event, "tool_name")
        args = event.get("tool_input")
        args = args if isinstance(args, dict) else {}
        scope = self._scope(tool, args)
        number = state["next"]
        state["next"] = number + 1
        if scope != []:
            before = self._snapshot(state, scope)
            _write_durably(self._pending_path(number), json.dumps(_seen_json(before)).encode())
        state["pending"].append(
            {"n": number, "tool": tool, "key": _match_key(args), "scope": scope}
        )

    def after_tool(self, state: dict[str, Any], event: Mapping[str, Any]) -> None:
        tool = _str(event, "tool_name")
        args = event.get("tool_input")
        args = args if isinstance(args, dict) else {}
        pending = _take(state["pending"], tool, _match_key(args))
        if pending is None:
            raise HookError(f"AfterTool of {tool} with no BeforeTool: its effects are unknown")
        state["observed"].append(self._observe(state, pending))

    def flush(self, state: dict[str, Any], now: datetime | None) -> Transcript | None:
        """A ``tool_call`` entry for each call the transcript holds and the trail does not."""
        from audit.geminicli.transcript import read_transcript
        from audit.jcs import jcs_sha256

        path = state.get("transcript")
        if not isinstance(path, str) or not path:
            return None
        transcript = read_transcript(Path(path))
        recorded = set(state["recorded"])
        for call in transcript.tool_calls:
            if call.id in recorded:
                continue
            key = _match_key(call.args)
            seen = _take(state["observed"], call.name, key)
            ran = seen is not None
            if seen is None:  # before but no after: the tool failed, or hangs still
                pending = _take(state["pending"], call.name, key)
                seen = None if pending is None else self._observe(state, pending)
            if seen is None:
                decision, effects = "refused", []
            else:  # a call denied after our BeforeTool ran keeps what git saw meanwhile
                denied = not ran and _denied(call)
                decision, effects = ("deny" if denied else "allow"), seen["effects"]
            self._append(
                state,
                {
                    "kind": "tool_call",
                    "call_id": call.id,
                    "tool": call.name,
                    "args_sha256": jcs_sha256(dict(call.args)),
                    "decision": decision,
                    "checkpoint": None,
                    "result_sha256": jcs_sha256(_response(call.id, call.response_parts)),
                    "effects": effects,
                },
                now,
            )
            recorded.add(call.id)
            state["recorded"].append(call.id)
        return transcript

    def end(self, state: dict[str, Any], status: str, how: str, now: datetime | None) -> None:
        transcript = self.flush(state, now)
        self._append(state, {"kind": "session_end", "status": status}, now)
        state["ended"] = how
        self.compose(state, transcript, status, how)

    def compose(
        self, state: dict[str, Any], transcript: Transcript | None, status: str, how: str
    ) -> None:
        """Write ``report.json`` (and keep a copy of the transcript) from the trail so far."""
        from audit.claims import claims_from_effects
        from audit.jcs import canonicalize

        entries = [json.loads(line) for line in self.trail.read_bytes().splitlines() if line]
        contents: list[dict[str, Any]] = []
        model = task = final_text = None
        usage = {"turns": 0, "tool_calls": 0, "prompt_tokens": 0, "output_tokens": 0}
        usage |= {"thoughts_tokens": 0, "cached_tokens": 0}
        if transcript is not None:
            contents = transcript.contents()
            models = transcript.models
            model = models[-1] if models else None
            task = transcript.task
            last = transcript.last
            if last is not None and last.type == "gemini" and last.text:
                final_text = last.text
            for m in transcript.messages:
                if m.type != "gemini":
                    continue
                tokens = m.tokens
                usage["turns"] += 1
                usage["prompt_tokens"] += _int(tokens.get("input"))
                usage["output_tokens"] += _int(tokens.get("output")) + _int(tokens.get("thoughts"))
                usage["thoughts_tokens"] += _int(tokens.get("thoughts"))
                usage["cached_tokens"] += _int(tokens.get("cached"))
            _write_durably(self.folder / "transcript.jsonl", transcript.raw)
        usage["tool_calls"] = sum(1 for e in entries if e.get("kind") == "tool_call")
        report: dict[str, Any] = {
            "schema_version": "1",
            "session_id": self.session_id,
            "agent": _drop_none(
                {"name": AGENT_NAME, "model": model, "tool_profile": tool_profile(model)}
            ),
            "repo": {
                "name": state["repo_name"],
                "path": state["root"],  # the workspace an absolute file_path is read against
                "base_commit": state["base_commit"],
                "head_commit": self._head(state["base_commit"]),
            },
            "started_at": state["started_at"] or entries[0]["ts"],
            "ended_at": entries[-1]["ts"],
            "status": status,
            "usage": usage,
            "changes": claims_from_effects(
                e for entry in entries for e in entry.get("effects", ())
            ),
            "trajectory": {"format": "gemini-contents", "contents": contents},
            "audit": {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]},
            "extensions": {
                "gemini_cli": {"end": how, "release": RELEASE, "hook_errors": self._errors()}
            },
        }
        recorder = server.witness_extension(state)
        if recorder is not None:
            report["extensions"]["recorder"] = recorder
        if task is not None:
            report["task"] = task
        if final_text is not None:
            report["final_text"] = final_text
        raw = canonicalize(server.sign_report(report, state.get("signing")))
        _write_durably(self.folder / "report.json", raw)
        server.post_report(state, raw, self.folder)

    def verdict(self, state: Mapping[str, Any]) -> dict[str, str]:
        """``verifier verify`` on the report, when install asked for it (``--verify``)."""
        command = _read_json(self.git_dir / "verifier" / "hook.json").get("verify")
        if not (isinstance(command, list) and all(isinstance(a, str) for a in command)):
            return {}
        report = self.folder / "report.json"
        try:
            done = subprocess.run(
                [*command, str(report), "--format", "json"],
                cwd=self.root,
                capture_output=True,
                timeout=VERIFY_TIMEOUT_S,
                check=False,
            )
            result = json.loads(done.stdout)
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            return {"systemMessage": f"verifier: the session was not verified ({exc})"}
        _write_durably(self.folder / "verdict.json", done.stdout, sync=False)
        return {"systemMessage": _verdict_line(result, report)}

    def finish_siblings(self, reason: object, now: datetime | None) -> None:
        """End the sessions this gemini-cli process ran that are not ended yet: in ACP mode
        (``--acp``, an editor's sessions) the process fires one ``SessionEnd``, under its
        own session id, for all the sessions it ran."""
        me = _agent_process()
        if me is None:
            return
        for other, state in self._others_unended():
            if state.get("agent") != me:
                continue
            status = "done" if state.get("answered") else _unanswered(reason)
            other.end(state, status, f"session_end:{reason}", now)
            other.save(state)
            other.verdict(state)

    def finish_others(self) -> None:
        """Finish this repository's other sessions whose end no hook saw (killed, or an
        API error under ``-o json``): their report, with the trail left unfinished."""
        for other, state in self._others_unended():
            if _alive(state.get("agent")):
                continue
            transcript = other.flush(state, None)
            state["ended"] = "not_seen"
            other.compose(state, transcript, "cancelled", "not_seen")
            other.save(state)

    def _others_unended(self) -> Iterator[tuple[_Session, dict[str, Any]]]:
        """This repository's other sessions not ended yet, each locked while the caller
        finishes it."""
        for folder in sorted((self.git_dir / "verifier").glob("*/state.json")):
            other = _Session(self.root, self.git_dir, folder.parent.name, self.cwd)
            if other.session_id == self.session_id:
                continue
            with other.locked():
                state = other.load()
                if state is not None and not state.get("ended"):
                    yield other, state

    # -- plumbing -----------------------------------------------------------------------

    def _append(
        self, state: dict[str, Any], body: Mapping[str, Any], now: datetime | None
    ) -> dict[str, Any]:
        from datetime import UTC, datetime

        from audit.chain import entry_hash
        from audit.claims import timestamp
        from audit.jcs import canonicalize

        moment = (now or datetime.now(UTC)).astimezone(UTC)
        ts = timestamp(moment)
        if state["last_ts"] is not None and ts < state["last_ts"]:
            ts = state["last_ts"]  # a clock set back: the trail's time never decreases
        entry: dict[str, Any] = {"v": 1, "session_id": self.session_id, "seq": state["seq"]}
        entry.update({"ts": ts, **body})
        entry["prev"] = state["prev"]
        entry["hash"] = entry_hash(entry)
        fd = os.open(self.trail, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            view = memoryview(canonicalize(entry) + b"\n")
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        state["seq"] += 1
        state["prev"] = entry["hash"]
        state["last_ts"] = ts
        if state.get("server") is not None:
            taken = server.witness(state, self.trail, entry, down=self.witness_down)
            self.witness_down = self.witness_down or not taken
        return entry

    def _scope(self, tool: str, args: Mapping[str, Any]) -> list[str] | None:
        """The repository paths the call may touch: [] none, None the whole tree."""
        if tool in READ_ONLY_TOOLS:
            return []
        key = FILE_TOOLS.get(tool)
        if key is None:
            return None
        named = args.get(key)
        if not isinstance(named, str) or not named:
            return []  # gemini-cli refuses the call before it runs
        path = Path(named) if os.path.isabs(named) else self.cwd / named
        try:
            rel = Path(os.path.normpath(path)).relative_to(self.root)
        except ValueError:  # outside the repository: no file of ours
            return []
        try:
            return [_worktree.relative(self.root, rel.as_posix())]
        except _worktree.PathOutsideRoot:
            return []

    def _snapshot(self, state: Mapping[str, Any], scope: list[str] | None) -> dict[str, Any]:
        if scope is None:
            cache = _worktree.HashCache()
            cache_path = self.folder / "hashes.json"
            with contextlib.suppress(FileNotFoundError, ValueError):
                cache.load(json.loads(cache_path.read_bytes()))
            seen = _worktree.snapshot(self.root, state["base_commit"], None, cache)
            _write_durably(cache_path, json.dumps(cache.dump()).encode(), sync=False)
            return seen
        return _worktree.snapshot(self.root, state["base_commit"], scope)

    def _observe(self, state: dict[str, Any], pending: Mapping[str, Any]) -> dict[str, Any]:
        scope = pending["scope"]
        effects: list[Any] = []
        if scope != []:
            path = self._pending_path(pending["n"])
            before = _seen_from_json(json.loads(path.read_bytes()))
            after = self._snapshot(state, scope)
            effects = _worktree.changed(before, after)
            path.unlink()
        return {"tool": pending["tool"], "key": pending["key"], "effects": effects}

    def _pending_path(self, number: int) -> Path:
        return self.folder / f"before-{number}.json"

    def _head(self, base: str) -> str | None:
        """The commit holding the work: HEAD when it moved past the base and nothing git sees
        is left uncommitted; None (the working tree) otherwise."""
        head = _worktree.git(self.root, "rev-parse", "HEAD").decode("ascii").strip()
        if head == base:
            return None
        status = _worktree.git(self.root, "status", "--porcelain", "-z", "--untracked-files=all")
        return head if not status else None

    def _errors(self) -> int:
        try:
            return self.folder.joinpath("hook-errors.log").read_bytes().count(b"\n---\n")
        except FileNotFoundError:
            return 0


def _unanswered(reason: object) -> str:
    """The status of a session that ended with its last prompt unanswered: ``error`` when
    gemini-cli exited (as when the model failed), ``cancelled`` otherwise."""
    return "error" if reason == "exit" else "cancelled"


def _verdict_line(result: Mapping[str, Any], report: Path) -> str:
    """One line for the gemini-cli user: done versus delivered, and the first finding."""
    status = str(result.get("delivery_status", "?")).replace("_", " ")
    done = "done" if result.get("done") else f"not done ({result.get('agent_status')})"
    line = f"verifier: {done}, {status}"
    checks = result.get("checks")
    for check in checks.values() if isinstance(checks, dict) else ():
        findings = check.get("findings") if isinstance(check, dict) else None
        if findings and isinstance(findings[0], dict):
            first = findings[0]
            line += f": {first.get('code')}" + (f" {first['path']}" if first.get("path") else "")
            break
    return f"{line} (report: {report})"


def _repository(cwd: Path) -> tuple[Path, Path]:
    """The work tree's root and the git directory holding `cwd`, found without running git."""
    for folder in (cwd, *cwd.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return folder, dot_git
        if dot_git.is_file():  # a linked worktree or a submodule: "gitdir: <path>"
            text = dot_git.read_text(encoding="utf-8").strip()
            if text.startswith("gitdir:"):
                return folder, (folder / text[len("gitdir:") :].strip()).resolve()
    raise HookError(f"cwd {str(cwd)!r} is in no git repository")


def _agent_process() -> list[int] | None:
    """gemini-cli's process (pid and start time, from ``/proc``): the parent of the shell
    that runs this hook, or the parent itself when the shell exec'd us."""
    pid = os.getppid()
    for _ in range(2):
        stat = _proc_stat(pid)
        if stat is None:
            return None
        comm, ppid, started = stat
        if comm not in ("sh", "bash", "dash", "zsh"):
            return [pid, started]
        pid = ppid
    return None


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    comm = data[data.index("(") + 1 : data.rindex(")")]
    fields = data[data.rindex(")") + 2 :].split()
    return comm, int(fields[1]), int(fields[19])


def _alive(agent: object) -> bool:
    """Whether the gemini-cli process `agent` ([pid, start time]) still runs."""
    if not (isinstance(agent, list) and len(agent) == 2):
        return False
    stat = _proc_stat(int(agent[0]))
    return stat is not None and stat[2] == agent[1]


def _take(items: list[dict[str, Any]], tool: str, key: str) -> dict[str, Any] | None:
    """The first item of `tool` with these arguments (`_match_key`), else the first of
    `tool`, removed (gemini-cli may have filled in an argument the model left out)."""
    for exact in (True, False):
        for i, item in enumerate(items):
            if item["tool"] == tool and (not exact or item["key"] == key):
                return items.pop(i)
    return None


# How gemini-cli 0.61 answers a call it did not run because a policy rule or a hook of
# the user's denied it (its scheduler's two messages); any other error ran the tool.
_DENIALS = ("Tool execution denied by policy.", "Tool execution blocked:")


def _denied(call: ToolCallRecord) -> bool:
    """Whether gemini-cli refused to run ``call`` (after our BeforeTool had seen it)."""
    error = _response(call.id, call.response_parts).get("error")
    return call.status == "error" and isinstance(error, str) and error.startswith(_DENIALS)


def _response(call_id: str, parts: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The ``functionResponse.response`` the model got for `call_id` (the first one's if no
    part names the id)."""
    responses = [
        p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), dict)
    ]
    for response in responses:
        if response.get("id") == call_id and isinstance(response.get("response"), dict):
            return dict(response["response"])
    for response in responses:
        if isinstance(response.get("response"), dict):
            return dict(response["response"])
    return {}


def _match_key(args: Mapping[str, Any]) -> str:
    """What a tool hook's arguments and the transcript's are matched by: any stable digest
    of the JSON does (the trail's ``args_sha256`` is the JCS one, written at the match)."""
    text = json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _seen_json(seen: Mapping[str, _worktree.Seen]) -> dict[str, list[str]]:
    return {path: [s.sha256, s.mode] for path, s in seen.items()}


def _seen_from_json(data: Mapping[str, Sequence[str]]) -> dict[str, _worktree.Seen]:
    return {path: _worktree.Seen(v[0], v[1]) for path, v in data.items()}


def _write_durably(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write `path` whole (a temporary file renamed over it), fsynced unless `sync` is off."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _str(event: Mapping[str, Any], key: str) -> str:
    value = event.get(key)
    if not isinstance(value, str) or not value:
        raise HookError(f"{key}: got {value!r}, expected a non-empty string")
    return value


def _int(value: object) -> int:
    return value if type(value) is int and value >= 0 else 0


def _drop_none(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}


def _complain(event: Any, exc: BaseException) -> None:
    """Write what went wrong where the session's files are, else to stderr."""
    import traceback

    text = "".join(traceback.format_exception(exc))
    name = event.get("hook_event_name") if isinstance(event, dict) else None
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {name}: {text}\n---\n"
    with contextlib.suppress(Exception):
        session = _Session.of(event)
        session.folder.mkdir(parents=True, exist_ok=True)
        with open(session.folder / "hook-errors.log", "a", encoding="utf-8") as fh:
            fh.write(line)
        return
    sys.stderr.write(line)


if __name__ == "__main__":
    sys.exit(main())
