"""Benchmark: the replay check on 1,000 bounded edits over 100 files, against bytes slicing.

The data: a repository of 100 files of about 200 lines each (non-ASCII text,
some CRLF), and a session of 1,000 ``replace_lines`` calls, ten per file, in
an order that interleaves the files, each with its expected text and a
replacement of one to three lines (so later line numbers count earlier edits),
each answered ``{"ok": true}`` with its effect (SHA-256 before and after) in an
audit trail; the head commit holds the result.

The subject is the check's work once the trajectory is loaded
(`replay_session`): normalising the calls with the default profile and
planning, while git lists the base tree; reading the base blobs; replaying
with every expected text, effect and head blob id compared. The baseline: reading the same 100
base blobs with one ``git cat-file --batch`` and applying the 1,000 edits with
plain ``bytes`` slicing, nothing checked. Target (issue 8): at most 2x.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from tests.benchmarks.timing import Result, Row, measure
from verifier._internal.git import Git
from verifier.agent.harness import agent_git
from verifier.checks.base import HeadState
from verifier.checks.replay import replay_session, split_lines
from verifier.contract.profiles import load_profile
from verifier.contract.trajectory import load_trajectory
from verifier.resources import profiles_dir

FILES = 100
EDITS = 1_000
LINES = 200
TARGET = 2.0
_WORDS = ["def", "return", "value", "result", "index", "path", "data", "café", "naïve", "über"]
_WORDS += ["東京", "✓", "self", "None"]


def _line(rng: random.Random, crlf: bool) -> bytes:
    text = "    " * rng.randrange(3) + " ".join(rng.choices(_WORDS, k=rng.randrange(3, 9)))
    return text.encode() + (b"\r\n" if crlf else b"\n")


def _build(
    tmp: Path,
) -> tuple[Path, HeadState, Any, list[dict[str, Any]], list[tuple[str, int, int, bytes]]]:
    rng = random.Random(8)
    root = tmp / "repo"
    root.mkdir()
    agent_git(root, "init", "-q", "-b", "main")
    files: dict[str, bytes] = {}
    for i in range(FILES):
        crlf = i % 10 == 0
        files[f"src/m{i:03d}.py"] = b"".join(_line(rng, crlf) for _ in range(LINES))
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    agent_git(root, "add", "-A")
    agent_git(root, "commit", "-q", "-m", "base")
    base = agent_git(root, "rev-parse", "HEAD").decode().strip()

    state = dict(files)
    paths = list(files)
    model: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    edits: list[tuple[str, int, int, bytes]] = []
    for n in range(EDITS):
        path = paths[(n * 37) % FILES]
        lines = split_lines(state[path])
        start = rng.randrange(1, len(lines) - 3)
        end = start + rng.randrange(0, 3)
        expected = b"".join(lines[start - 1 : end])
        crlf = expected.endswith(b"\r\n")
        replacement = b"".join(_line(rng, crlf) for _ in range(rng.randrange(1, 4)))
        after = b"".join(lines[: start - 1]) + replacement + b"".join(lines[end:])
        cid = f"c{n}"
        args = {
            "path": path,
            "start_line": start,
            "end_line": end,
            "expected": expected.decode(),
            "replacement": replacement.decode(),
        }
        model.append({"function_call": {"id": cid, "name": "replace_lines", "args": args}})
        responses.append(
            {"function_response": {"id": cid, "name": "replace_lines", "response": {"ok": True}}}
        )
        before_sha = hashlib.sha256(state[path]).hexdigest()
        effect = {
            "path": path,
            "sha256_before": before_sha,
            "sha256_after": hashlib.sha256(after).hexdigest(),
        }
        entries.append({"kind": "tool_call", "call_id": cid, "effects": [effect]})
        edits.append((path, start, end, replacement))
        state[path] = after
    for path, data in state.items():
        (root / path).write_bytes(data)
    agent_git(root, "add", "-A")
    agent_git(root, "commit", "-q", "-m", "head")
    head = agent_git(root, "rev-parse", "HEAD").decode().strip()
    # What the changes check establishes: the changed paths and their blobs at the head.
    listing = agent_git(root, "ls-tree", "-r", "-z", head).split(b"\0")
    blobs = {r.split(b"\t", 1)[1].decode(): r.split()[2].decode() for r in listing if r}
    state_fact = HeadState("commit", base, head, changed=tuple(sorted(state)), changed_blobs=blobs)
    contents = [{"role": "model", "parts": model}, {"role": "user", "parts": responses}]
    calls = load_trajectory(contents).calls
    return root, state_fact, calls, entries, edits


def run(tmp: Path, repeat: int) -> Result:
    root, head_state, calls, entries, edits = _build(tmp)
    profile = load_profile(profiles_dir(), "default")
    git = Git(root)
    base_tree = git.run("ls-tree", "-r", "-z", head_state.base_commit)
    blobs = {}
    for record in base_tree.split(b"\0"):
        if record:
            meta, path = record.split(b"\t", 1)
            blobs[path.decode()] = meta.split()[2].decode()

    def subject() -> None:
        result = replay_session(root, head_state, profile, calls, entries)
        assert result.status.value == "pass", result.findings[:1]

    def baseline() -> None:
        read = dict(
            zip(
                blobs,
                (raw for _, raw in git.read_objects([(sha, "blob") for sha in blobs.values()])),
                strict=True,
            )
        )
        for path, start, end, replacement in edits:
            data = read[path]
            a = 0
            for _ in range(start - 1):
                a = data.index(b"\n", a) + 1
            b = a
            for _ in range(end - start + 1):
                b = data.index(b"\n", b) + 1
            read[path] = data[:a] + replacement + data[b:]

    times = measure({"subject": subject, "baseline": baseline}, repeat)
    row = Row(
        "replay",
        "replay check: 1,000 bounded edits, 100 files (plan, read, replay)",
        times["subject"],
        "read the 100 base blobs, apply the edits by bytes slicing",
        times["baseline"],
        f"<= {TARGET:g}x",
        times["baseline"] * TARGET,
    )
    facts = {
        "replay data": f"{FILES} files of {LINES} lines (one in ten CRLF), {EDITS} "
        "replace_lines calls, ten per file, interleaved"
    }
    return Result([row], facts)
