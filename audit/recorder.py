"""The recorder: what a harness embeds in its google-genai loop to produce a v1 report.

A harness keeps its own loop (automatic function calling disabled) and hands
the recorder each model reply and each tool call::

    rec = Recorder.open(root, session_id="s-1", agent=Agent("my-agent"),
                        repo_name="calc", trail=Path("s-1.jsonl"), task="Fix subtract.")
    while True:
        response = client.models.generate_content(model=..., contents=rec.contents, ...)
        calls = rec.reply(response)
        if not calls:
            break
        for call in calls:
            rec.execute(call, my_tools[call.name], paths=[call.args["path"]])
        rec.respond()
    report = rec.finish("done", head_commit=...)

It records:

1. each model reply as returned (``response.candidates[0].content``, thought
   signatures untouched), and its usage metadata;
2. each tool call: its decision, checkpoint, the response sent back and the
   file effects, from two snapshots of the files git would see (only the
   `paths` named for a file tool; the whole tree for a command), hashed as git
   would store them (`audit._worktree`), so a command that edits files has
   exact effects;
3. the audit trail, one JSONL line per entry (the entry's JCS form), written
   and fsynced before the tool's response is handed back, so a crash loses no
   executed call; an optional `witness` hook is called with each entry once it
   is on disk;
4. at `finish`, the session report v1: claims composed from the effects (a
   file changed twice is one claim from its first before to its last after;
   created then deleted is none), usage as the contract counts it (thought
   tokens are output tokens), timestamps in UTC.

`dumps` gives the report's bytes (its JCS form: UTF-8, deterministic), and
`audit.signing` signs them; `audit.upload` posts them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.genai import types

from audit import _worktree
from audit.chain import entry_hash, genesis
from audit.claims import claims_from_effects, timestamp
from audit.errors import RecorderError
from audit.jcs import CanonicalizationError, canonicalize, jcs_sha256

__all__ = [
    "Agent",
    "PendingCall",
    "Recorder",
    "Tool",
    "Usage",
    "Witness",
    "claims_from_effects",
    "dumps",
    "timestamp",
]

#: A tool as the recorder runs it: the call's arguments in, the response object out.
Tool = Callable[[Mapping[str, Any]], Any]
#: Called with each entry once it is written and fsynced (the witness client, later).
Witness = Callable[[Mapping[str, Any]], object]

DECISIONS_EXECUTED = ("allow", "confirmed")
DECISIONS_NOT_EXECUTED = ("deny", "refused")


@dataclass(frozen=True, slots=True)
class Agent:
    """The harness that recorded the session (the report's ``agent``)."""

    name: str
    version: str | None = None
    model: str | None = None
    tool_profile: str | None = "default"


@dataclass(frozen=True, slots=True)
class Usage:
    """The report's ``usage``: ``output_tokens`` includes the thought tokens (billed as output)."""

    turns: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    thoughts_tokens: int = 0
    cached_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "thoughts_tokens": self.thoughts_tokens,
            "cached_tokens": self.cached_tokens,
        }


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A function call of the last model reply, waiting to be executed or denied."""

    call_id: str
    name: str
    args: Mapping[str, Any]
    function_call: types.FunctionCall


@dataclass(slots=True)
class _Tokens:
    prompt: int = 0
    candidates: int = 0
    thoughts: int = 0
    cached: int = 0

    def add(self, meta: types.GenerateContentResponseUsageMetadata | None) -> None:
        if meta is None:
            return
        self.prompt += meta.prompt_token_count or 0
        self.candidates += meta.candidates_token_count or 0
        self.thoughts += meta.thoughts_token_count or 0
        self.cached += meta.cached_content_token_count or 0


@dataclass(slots=True)
class _Trail:
    """The JSONL trail file: each entry chained, written whole and fsynced."""

    fd: int
    session_id: str
    prev: str
    entries: list[dict[str, Any]] = field(default_factory=list)

    def append(self, body: Mapping[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {"v": 1, "session_id": self.session_id, "seq": len(self.entries)}
        entry.update(body)
        entry["prev"] = self.prev
        entry["hash"] = entry_hash(entry)
        line = canonicalize(entry) + b"\n"
        view = memoryview(line)
        while view:
            view = view[os.write(self.fd, view) :]
        os.fsync(self.fd)
        self.prev = entry["hash"]
        self.entries.append(entry)
        return entry


class Recorder:
    """One session's recorder; see the module's docstring for the loop around it."""

    def __init__(
        self,
        root: Path,
        *,
        session_id: str,
        agent: Agent,
        repo_name: str,
        trail: Path,
        task: str | None = None,
        branch: str | None = None,
        url: str | None = None,
        base_commit: str | None = None,
        clock: Callable[[], datetime] | None = None,
        witness: Witness | None = None,
    ) -> None:
        """Prefer `Recorder.open`, which also writes the ``session_start`` entry."""
        _session_id(session_id)
        for name, value in (
            ("agent.name", agent.name),
            ("agent.version", agent.version),
            ("agent.model", agent.model),
            ("agent.tool_profile", agent.tool_profile),
            ("repo.name", repo_name),
            ("repo.branch", branch),
        ):
            _indexed(name, value)
        if not agent.name:
            raise RecorderError("must not be empty", "agent.name")
        self.root = root.resolve()
        self.session_id = session_id
        self.agent = agent
        self.repo_name = repo_name
        self.task = task
        self.branch = branch
        self.url = url
        try:
            self.base_commit = (
                base_commit or _worktree.git(self.root, "rev-parse", "HEAD").decode("ascii").strip()
            )
        except OSError as exc:
            raise RecorderError(str(exc), "repo.base_commit") from None
        self.contents: list[types.Content] = []
        self._clock = clock or (lambda: datetime.now(UTC))
        self._last_ts: datetime | None = None
        self._witness = witness
        self._witness_failures: list[str] = []
        self._tokens = _Tokens()
        self._hashes = _worktree.HashCache()
        self._turns = 0
        self._pending: list[PendingCall] = []
        self._responses: list[types.Part] = []
        self._started_at: str | None = None
        self._report: dict[str, Any] | None = None
        try:
            fd = os.open(trail, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except OSError as exc:
            raise RecorderError(f"cannot create the trail file: {exc.strerror}", "trail") from None
        _fsync_dir(trail.parent)
        self.trail_path = trail
        self._trail = _Trail(fd, session_id, genesis(session_id))

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        session_id: str,
        agent: Agent,
        repo_name: str,
        trail: Path,
        task: str | None = None,
        branch: str | None = None,
        url: str | None = None,
        base_commit: str | None = None,
        clock: Callable[[], datetime] | None = None,
        witness: Witness | None = None,
    ) -> Recorder:
        """A recorder with its ``session_start`` entry written, and the task as the first turn.

        `root` is the repository's working tree; `trail` a new file (never
        overwritten); `base_commit` defaults to HEAD; `clock` (aware datetimes,
        any offset) to the system's; `witness` is called with each entry once
        it is on disk.
        """
        rec = cls(
            root,
            session_id=session_id,
            agent=agent,
            repo_name=repo_name,
            trail=trail,
            task=task,
            branch=branch,
            url=url,
            base_commit=base_commit,
            clock=clock,
            witness=witness,
        )
        rec.start()
        return rec

    # -- the session --------------------------------------------------------------------

    def start(self) -> None:
        """Write the ``session_start`` entry; the task, if any, becomes the first user turn."""
        if self._trail.entries:
            raise RecorderError("the session has already started")
        entry = self._write({"kind": "session_start"})
        self._started_at = entry["ts"]
        if self.task is not None:
            self.contents.append(types.Content(role="user", parts=[types.Part(text=self.task)]))

    def user(self, text: str) -> types.Content:
        """A user turn of text (a follow-up instruction), appended to the history."""
        content = types.Content(role="user", parts=[types.Part(text=text)])
        self.contents.append(content)
        return content

    def reply(self, response: types.GenerateContentResponse) -> list[PendingCall]:
        """Record the model's reply as returned; its function calls, to execute or deny.

        The calls of the previous reply must all have been answered (`respond`).
        """
        self._require_open()
        if self._pending:
            raise RecorderError(
                f"got a new reply with {len(self._pending)} call(s) of the last one unanswered, "
                "expected execute/deny for each, then respond()"
            )
        if not response.candidates or response.candidates[0].content is None:
            raise RecorderError("the response has no candidate content", "candidates[0].content")
        content = response.candidates[0].content
        self._tokens.add(response.usage_metadata)
        self._turns += 1
        i = len(self.contents)
        self.contents.append(content)
        for j, part in enumerate(content.parts or []):
            fc = part.function_call
            if fc is None:
                continue
            self._pending.append(
                PendingCall(
                    call_id=fc.id or f"t{i}.p{j}",
                    name=fc.name or "",
                    args=_as_json("args", dict(fc.args or {})),
                    function_call=fc,
                )
            )
        return list(self._pending)

    def execute(
        self,
        call: PendingCall,
        tool: Tool,
        *,
        paths: Iterable[str] | None = None,
        checkpoint: str | None = None,
        decision: str = "allow",
    ) -> dict[str, Any]:
        """Run `tool` on the call's arguments and record it; the response sent back.

        `paths`: the files a file tool may touch (relative to the repository;
        one outside it is refused, recorded as denied, before anything runs); None for a command,
        whose effects are every file git sees that changed. A tool that raises
        is answered ``{"error": ...}``: the call was attempted, so it is recorded.
        """
        if decision not in DECISIONS_EXECUTED:
            raise RecorderError(
                f"got {decision!r}, expected one of {', '.join(DECISIONS_EXECUTED)}", "decision"
            )
        self._take(call)
        try:
            scope = None if paths is None else [_worktree.relative(self.root, p) for p in paths]
        except _worktree.PathOutsideRoot as exc:  # refused, never run: a denied call
            return self._answer(call, {"error": str(exc)}, "deny", None, [])
        before = _worktree.snapshot(self.root, self.base_commit, scope, self._hashes)
        try:
            result = tool(call.args)
        except Exception as exc:  # the tool's failure is the model's to see, and the trail's
            result = {"error": f"{type(exc).__name__}: {exc}"}
        after = _worktree.snapshot(self.root, self.base_commit, scope, self._hashes)
        response = result if isinstance(result, dict) else {"result": result}
        try:
            response = _as_json("response", response)
        except RecorderError as exc:
            response = {"error": f"the tool's response is not JSON: {exc.problem}"}
        return self._answer(call, response, decision, checkpoint, _worktree.changed(before, after))

    def deny(
        self, call: PendingCall, response: Mapping[str, Any], *, decision: str = "deny"
    ) -> dict[str, Any]:
        """Record a call that is not executed (``deny`` or ``refused``), answered `response`."""
        if decision not in DECISIONS_NOT_EXECUTED:
            raise RecorderError(
                f"got {decision!r}, expected one of {', '.join(DECISIONS_NOT_EXECUTED)}",
                "decision",
            )
        self._take(call)
        return self._answer(call, _as_json("response", dict(response)), decision, None, [])

    def respond(self) -> types.Content:
        """The user turn answering every call of the last reply, appended to the history."""
        if self._pending:
            names = ", ".join(c.call_id for c in self._pending)
            raise RecorderError(f"calls not answered yet: {names}")
        if not self._responses:
            raise RecorderError("the last reply had no function call to answer")
        content = types.Content(role="user", parts=self._responses)
        self._responses = []
        self.contents.append(content)
        return content

    def finish(
        self,
        status: str,
        usage: Usage | None = None,
        *,
        head_commit: str | None = None,
        final_text: str | None = None,
        tests: Mapping[str, Any] | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write ``session_end`` and return the session report v1.

        `usage` defaults to what the replies' usage metadata add up to.
        `final_text` defaults to the last model turn's text. `head_commit`
        None claims the work is in the working tree.
        """
        self._require_open()
        _indexed("status", status)
        if not status:
            raise RecorderError("must not be empty", "status")
        if self._pending or self._responses:
            raise RecorderError("calls of the last reply are not answered yet (respond())")
        end = self._write({"kind": "session_end", "status": status})
        os.close(self._trail.fd)
        entries = self._trail.entries
        report: dict[str, Any] = {
            "schema_version": "1",
            "session_id": self.session_id,
            "agent": _drop_none(
                {
                    "name": self.agent.name,
                    "version": self.agent.version,
                    "model": self.agent.model,
                    "tool_profile": self.agent.tool_profile,
                }
            ),
            "repo": _drop_none(
                {
                    "name": self.repo_name,
                    "url": self.url,
                    "base_commit": self.base_commit,
                    "head_commit": head_commit,
                    "branch": self.branch,
                },
                keep=("head_commit",),
            ),
            "started_at": self._started_at,
            "ended_at": end["ts"],
            "status": status,
            "usage": (usage or self.usage()).as_dict(),
            "changes": claims_from_effects(
                e for entry in entries for e in entry.get("effects", ())
            ),
            "trajectory": {
                "format": "gemini-contents",
                "contents": [c.model_dump(mode="json", exclude_none=True) for c in self.contents],
            },
            "audit": {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]},
        }
        if self.task is not None:
            report["task"] = self.task
        text = final_text if final_text is not None else self._last_text()
        if text is not None:
            report["final_text"] = text
        if tests is not None:
            report["tests"] = dict(tests)
        ext = dict(extensions or {})
        if self._witness is not None:
            ext["recorder"] = {
                "witness": {
                    "failures": len(self._witness_failures),
                    "first_failure": self._witness_failures[0] if self._witness_failures else None,
                }
            }
        if ext:
            report["extensions"] = ext
        self._report = report
        return report

    def usage(self) -> Usage:
        """Usage so far, from the replies' metadata: thought tokens counted as output."""
        t = self._tokens
        return Usage(
            turns=self._turns,
            tool_calls=sum(1 for e in self._trail.entries if e["kind"] == "tool_call"),
            prompt_tokens=t.prompt,
            output_tokens=t.candidates + t.thoughts,
            thoughts_tokens=t.thoughts,
            cached_tokens=t.cached,
        )

    def close(self) -> None:
        """Close the trail without finishing (an aborted harness): the trail stays unfinished."""
        if self._report is None:
            with contextlib.suppress(OSError):  # closed already
                os.close(self._trail.fd)

    # -- plumbing -------------------------------------------------------------------------

    def _require_open(self) -> None:
        if not self._trail.entries:
            raise RecorderError("the session has not started (start())")
        if self._report is not None:
            raise RecorderError("the session is finished")

    def _take(self, call: PendingCall) -> None:
        self._require_open()
        if call not in self._pending:
            raise RecorderError(f"call {call.call_id} is not waiting for an answer", "call")
        self._pending.remove(call)

    def _answer(
        self,
        call: PendingCall,
        response: dict[str, Any],
        decision: str,
        checkpoint: str | None,
        effects: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        self._write(
            {
                "kind": "tool_call",
                "call_id": call.call_id,
                "tool": call.name,
                "args_sha256": jcs_sha256(call.args),
                "decision": decision,
                "checkpoint": checkpoint,
                "result_sha256": jcs_sha256(response),
                "effects": list(effects),
            }
        )
        self._responses.append(
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.function_call.id, name=call.name, response=response
                )
            )
        )
        return response

    def _write(self, body: dict[str, Any]) -> dict[str, Any]:
        body = {"ts": self._now(), **body}
        try:
            entry = self._trail.append(body)
        except OSError as exc:
            raise RecorderError(f"cannot write the trail: {exc.strerror}", "trail") from None
        if self._witness is not None:
            try:
                self._witness(entry)
            except Exception as exc:  # the witness is out of reach: keep going, and say so
                self._witness_failures.append(f"entry {entry['seq']}: {exc}")
        return entry

    def _now(self) -> str:
        moment = self._clock()
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise RecorderError(f"got {moment.isoformat()}, expected an aware datetime", "clock")
        moment = moment.astimezone(UTC)
        if self._last_ts is not None and moment < self._last_ts:
            moment = self._last_ts  # a clock set back: the trail's time never decreases
        self._last_ts = moment
        return timestamp(moment)

    def _last_text(self) -> str | None:
        for content in reversed(self.contents):
            if content.role == "model":
                texts = [p.text for p in content.parts or [] if p.text and not p.thought]
                return "".join(texts) if texts else None
        return None


def dumps(report: Mapping[str, Any]) -> bytes:
    """The report's bytes: its JCS form (UTF-8, no insignificant space, deterministic)."""
    try:
        return canonicalize(report)
    except CanonicalizationError as exc:
        raise RecorderError(f"the report has no JSON form: {exc}") from None


def _as_json(name: str, value: dict[str, Any]) -> dict[str, Any]:
    """`value` as the verifier will read it back from the report's JSON (tuples become
    lists...), so that the hashes recorded are of what the report holds."""
    try:
        back = json.loads(json.dumps(value, allow_nan=False, ensure_ascii=False))
        canonicalize(back)
    except (TypeError, ValueError) as exc:  # CanonicalizationError is a ValueError
        raise RecorderError(f"has no JSON form: {exc}", name) from None
    if not isinstance(back, dict):
        raise RecorderError(f"got {type(back).__name__}, expected an object", name)
    return back


def _drop_none(obj: dict[str, Any], keep: Sequence[str] = ()) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None or k in keep}


def _session_id(value: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", value):
        raise RecorderError(
            f"got {value!r}, expected 1-128 characters of [A-Za-z0-9._:-]", "session_id"
        )


def _indexed(name: str, value: str | None) -> None:
    """The strings the verifier indexes sessions by hold no NUL (the contract's rule)."""
    if value is not None and "\x00" in value:
        raise RecorderError("contains U+0000 (NUL), which the contract forbids here", name)


def _fsync_dir(folder: Path) -> None:
    """Make a new file's name durable too: fsync its folder (where the platform allows)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
