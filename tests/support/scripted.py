"""A small harness written against the recorder, with a scripted model and real tools.

The model is a fake ``client.models.generate_content`` that replays recorded
``types.GenerateContentResponse`` turns (REST JSON, thought signatures and
usage metadata included): no network, no key. The tools are the `default`
profile's, run for real on the repository's working tree.

Run as a script (``python scripted.py ROOT TRAIL TURNS.json STOP_AFTER``) it
records a session and, once STOP_AFTER entries are on disk, prints their count
and waits to be killed: the crash test's child.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from google.genai import types

from audit.recorder import Agent, Recorder

ALLOWED_COMMANDS = ("python", "git", "chmod", sys.executable)
OUTPUT_LIMIT = 4000


class ScriptedClient:
    """Stands in for ``genai.Client``: ``client.models.generate_content`` replays `responses`."""

    def __init__(self, responses: Iterable[types.GenerateContentResponse]) -> None:
        self._responses = list(responses)
        self.models = self
        self.seen: list[int] = []  # the history length each call was given

    def generate_content(
        self, *, model: str, contents: Sequence[types.Content], config: object = None
    ) -> types.GenerateContentResponse:
        self.seen.append(len(contents))
        if not self._responses:
            return response({"text": "I am out of turns."})
        return self._responses.pop(0)


def response(
    *parts: Mapping[str, Any], prompt: int = 100, output: int = 20, thoughts: int = 10
) -> types.GenerateContentResponse:
    """A model reply as the API's REST JSON has it (camelCase), parsed by the SDK."""
    return types.GenerateContentResponse.model_validate(
        {
            "candidates": [{"content": {"role": "model", "parts": list(parts)}, "index": 0}],
            "usageMetadata": {
                "promptTokenCount": prompt,
                "candidatesTokenCount": output,
                "thoughtsTokenCount": thoughts,
                "totalTokenCount": prompt + output + thoughts,
            },
        }
    )


def load_turns(path: Path) -> list[types.GenerateContentResponse]:
    """Recorded replies: a JSON array of REST ``GenerateContentResponse`` objects."""
    return [
        types.GenerateContentResponse.model_validate(r)
        for r in json.loads(path.read_text(encoding="utf-8"))
    ]


# -- the default profile's tools, for real ----------------------------------------------


def read_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"output": (root / args["path"]).read_bytes().decode("utf-8")}


def write_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    path = root / args["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(str(args["content"]).encode("utf-8"))
    return {"ok": True}


def replace_lines(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    path = root / args["path"]
    lines = path.read_bytes().decode("utf-8").splitlines(keepends=True)
    start, end = int(args["start_line"]), int(args["end_line"])
    if "".join(lines[start - 1 : end]) != args["expected"]:
        return {"ok": False, "error": "expected text does not match the lines"}
    lines[start - 1 : end] = [args["replacement"]]
    path.write_bytes("".join(lines).encode("utf-8"))
    return {"ok": True}


def delete_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    (root / args["path"]).unlink()
    return {"ok": True}


def run_command(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    argv = shlex.split(str(args["command"]))
    if argv and argv[0] == "python":
        argv[0] = sys.executable
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=120, check=False)
    return {"exit_code": done.returncode, "output": (done.stdout + done.stderr)[-OUTPUT_LIMIT:]}


FILE_TOOLS: dict[str, Callable[[Path, Mapping[str, Any]], dict[str, Any]]] = {
    "read_file": read_file,
    "write_file": write_file,
    "replace_lines": replace_lines,
    "delete_file": delete_file,
}
WRITES = ("write_file", "replace_lines", "delete_file")


def run_session(rec: Recorder, client: ScriptedClient, *, max_turns: int = 25) -> str:
    """The manual loop: each reply recorded, each call executed or denied, then answered."""
    root = rec.root
    for _ in range(max_turns):
        calls = rec.reply(client.models.generate_content(model="m", contents=rec.contents))
        if not calls:
            return "done"
        for call in calls:
            if call.name == "run_command":
                argv = shlex.split(str(call.args.get("command", "")))
                if argv and argv[0] in ALLOWED_COMMANDS:
                    rec.execute(call, partial(run_command, root))
                else:
                    rec.deny(call, {"error": "command not allowed"})
            elif call.name in FILE_TOOLS:
                checkpoint = f"before-{call.call_id}" if call.name in WRITES else None
                path = str(call.args.get("path", ""))
                rec.execute(
                    call, partial(FILE_TOOLS[call.name], root), paths=[path], checkpoint=checkpoint
                )
            else:
                rec.deny(call, {"error": f"unknown tool {call.name!r}"})
        rec.respond()
    return "turns_exhausted"


def ticking(start: datetime = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)) -> Callable[[], datetime]:
    """A clock one second a reading: reports that reproduce."""
    moments = (start + timedelta(seconds=s) for s in range(1_000_000))
    return lambda: next(moments)


def recorder(root: Path, trail: Path, session_id: str = "s-1", **kw: Any) -> Recorder:
    kw.setdefault("clock", ticking())
    kw.setdefault("task", "Fix subtract.")
    return Recorder.open(
        root,
        session_id=session_id,
        agent=Agent("rec-agent", version="0.1.0", model="gemini-3.5-flash"),
        repo_name="calc",
        trail=trail,
        **kw,
    )


def _crash_child(root: str, trail: str, turns: str, stop_after: str) -> None:
    """Record until `stop_after` entries are on disk, say so, then wait to be killed."""
    stop = int(stop_after)

    def witness(entry: Mapping[str, Any]) -> None:
        if entry["seq"] + 1 == stop:
            sys.stdout.write(f"{stop}\n")
            sys.stdout.flush()
            sys.stdin.read()  # blocks until the parent kills us

    rec = recorder(Path(root), Path(trail), witness=witness)
    run_session(rec, ScriptedClient(load_turns(Path(turns))))
    rec.finish("done")


if __name__ == "__main__":
    _crash_child(*sys.argv[1:])
