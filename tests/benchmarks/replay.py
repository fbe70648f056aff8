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

Then the budget (issue 16, class 11): 1,000, 4,000 and 16,000 one-line
bounded replaces on one 5 MB file, each with its effect recorded (the line is
changed and changed back in turn, so that building the trail hashes two
states, not one per call). The subject is the same `replay_session`; the
baseline reads the base blob, splits it into lines once, applies the edits to
the list and joins and hashes the result once. Target: at most 2x the
baseline plus 100 us a call (planning a call through the profile, which the
baseline does not do) at each size: a cost per call that grows with neither
the file nor the calls (it did: a whole-file rejoin and hash per call).
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
    rows = [row, *(_large_file_row(tmp, calls, repeat) for calls in LARGE_CALLS)]
    facts = {
        "replay data": f"{FILES} files of {LINES} lines (one in ten CRLF), {EDITS} "
        "replace_lines calls, ten per file, interleaved",
        "replay budget data": f"one file of {LARGE_LINES:,} lines "
        f"({len(_large_base()) / 1e6:.1f} MB), one-line replace_lines calls, each recorded",
    }
    return Result(rows, facts)


LARGE_LINES = 100_000
LARGE_CALLS = (1_000, 4_000, 16_000)
# What a call costs whatever the file: planning it through the profile (about 60 us)
# and replaying one line; the baseline does neither.
PER_CALL_S = 100e-6


def _large_base() -> bytes:
    return b"".join(
        b"    value_%06d = compute(%06d, data)  # line\n" % (n, n) for n in range(LARGE_LINES)
    )


def _large_file_row(tmp: Path, calls: int, repeat: int) -> Row:
    """`calls` one-line replaces on one 5 MB file, against split, slice, join and hash once."""
    base = _large_base()
    root = tmp / f"large-{calls}"
    root.mkdir()
    agent_git(root, "init", "-q", "-b", "main")
    (root / "big.py").write_bytes(base)
    agent_git(root, "add", "-A")
    agent_git(root, "commit", "-q", "-m", "base")
    base_commit = agent_git(root, "rev-parse", "HEAD").decode().strip()
    lines = split_lines(base)
    at = LARGE_LINES // 2
    old, new = lines[at - 1], lines[at - 1].replace(b"value", b"VALUE")
    changed = b"".join(lines[: at - 1]) + new + b"".join(lines[at:])
    digest = {False: hashlib.sha256(base).hexdigest(), True: hashlib.sha256(changed).hexdigest()}
    model, responses, entries, edits = [], [], [], []
    for n in range(calls):
        forth = n % 2 == 0
        expected, replacement = (old, new) if forth else (new, old)
        cid = f"c{n}"
        args = {
            "path": "big.py",
            "start_line": at,
            "end_line": at,
            "expected": expected.decode(),
            "replacement": replacement.decode(),
        }
        model.append({"function_call": {"id": cid, "name": "replace_lines", "args": args}})
        responses.append(
            {"function_response": {"id": cid, "name": "replace_lines", "response": {"ok": True}}}
        )
        effect = {
            "path": "big.py",
            "sha256_before": digest[not forth],
            "sha256_after": digest[forth],
        }
        entries.append({"kind": "tool_call", "call_id": cid, "effects": [effect]})
        edits.append((at, replacement))
    (root / "big.py").write_bytes(changed if calls % 2 else base)
    agent_git(root, "add", "-A")
    agent_git(root, "commit", "-q", "--allow-empty", "-m", "head")
    head = agent_git(root, "rev-parse", "HEAD").decode().strip()
    blob = agent_git(root, "rev-parse", "HEAD:big.py").decode().strip()
    state = HeadState(
        "commit", base_commit, head, changed=("big.py",), changed_blobs={"big.py": blob}
    )
    contents = [{"role": "model", "parts": model}, {"role": "user", "parts": responses}]
    trajectory = load_trajectory(contents).calls
    profile = load_profile(profiles_dir(), "default")
    git = Git(root)
    base_blob = agent_git(root, "rev-parse", f"{base_commit}:big.py").decode().strip()

    def subject() -> None:
        result = replay_session(root, state, profile, trajectory, entries)
        assert result.status.value == "pass", result.findings[:1]

    def baseline() -> None:
        ((_, raw),) = git.read_objects([(base_blob, "blob")])
        kept = split_lines(raw)
        for line, replacement in edits:
            kept[line - 1 : line] = [replacement]
        hashlib.sha256(b"".join(kept)).hexdigest()

    times = measure({"subject": subject, "baseline": baseline}, repeat)
    return Row(
        "replay",
        f"replay check: {calls:,} one-line replaces on one {len(base) / 1e6:.0f} MB file "
        f"({times['subject'] / calls * 1e6:.0f} us a call)",
        times["subject"],
        "read the blob, split, apply the edits to the lines, join and hash once",
        times["baseline"],
        f"<= {TARGET:g}x + {PER_CALL_S * 1e6:.0f} us a call",
        times["baseline"] * TARGET + calls * PER_CALL_S,
    )
