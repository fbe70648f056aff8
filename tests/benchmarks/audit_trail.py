"""Benchmark 2: verifying a 10,000-entry audit trail against hashing its entries' bytes.

The data: a trail sealed with `audit.seal` (one session_start, 9,998 tool_call
entries, one session_end) and the matching trajectory calls and claims. The
calls mix the default profile's tools the way an editing session does (reads,
searches, bounded replaces, whole-file writes, test runs), with realistic
arguments and responses (file text with non-ASCII characters, command output),
so that every call's arguments and response are hashed too. About a third of
the calls change a file (one effect each), and the claims are the net effects.

The subject is `audit.verify_trail`. The targeted ratio is against the floor of
this design: the fast encoder (orjson, sorted keys: the JCS bytes of these
values) and SHA-256 over every value the trail has hashed (the 10,000 entries
and every call's arguments and response), with no check at all. For context,
every row is also given against SHA-256 over each entry's JSON bytes
(``json.dumps(entry).encode()``, computed beforehand), and `verify_chain` and
`check_completeness` are timed alone to show what dominates.
"""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import audit
from audit import Call, Change, jcs
from tests.benchmarks.timing import Result, Row, measure

ENTRIES = 10_000
SESSION = "s-bench-2026-11-29-0001"
TARGET = 2.5  # verify_trail / the floor

_VOCABULARY = (
    "def return self value result items index path data config error check commit "
    "tree blob hash line text name open close read write None True False café naïve "
    "über 東京 ✓"
)
_WORDS = _VOCABULARY.split()
_FILES = [f"src/pkg{i % 12:02d}/module_{i:03d}.py" for i in range(300)]


def _text(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    total = 0
    while total < size:
        line = "    " * rng.randrange(3) + " ".join(rng.choices(_WORDS, k=rng.randrange(3, 10)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def _sha(rng: random.Random) -> str:
    return rng.randbytes(32).hex()


class _Files:
    """The current SHA-256 of each file, so that effects chain like a real session's."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.state: dict[str, str | None] = {p: _sha(rng) for p in _FILES}

    def change(self, path: str, *, delete: bool = False) -> dict[str, Any]:
        before = self.state.get(path)
        after = None if delete else _sha(self.rng)
        self.state[path] = after
        return {"path": path, "sha256_before": before, "sha256_after": after}


def _call(rng: random.Random, files: _Files, i: int) -> tuple[str, dict[str, Any], Any, list[Any]]:
    """(tool, args, response, effects) of one call, from a realistic mix of tools."""
    path = rng.choice(_FILES)
    pick = rng.random()
    if pick < 0.40:
        return "read_file", {"path": path}, {"output": _text(rng, rng.randint(400, 2000))}, []
    if pick < 0.55:
        args = {"pattern": rng.choice(_WORDS), "path": "src", "regex": rng.random() < 0.3}
        matches = [
            {"path": rng.choice(_FILES), "line": rng.randint(1, 400), "text": _text(rng, 60)}
            for _ in range(rng.randint(0, 6))
        ]
        return "search", args, {"matches": matches}, []
    if pick < 0.80:
        start = rng.randint(1, 300)
        args = {
            "path": path,
            "start_line": start,
            "end_line": start + rng.randint(0, 3),
            "expected": _text(rng, 80),
            "replacement": _text(rng, 80),
        }
        return "replace_lines", args, {"ok": True}, [files.change(path)]
    if pick < 0.90:
        new = f"src/new/generated_{i:05d}.py" if rng.random() < 0.3 else path
        args = {"path": new, "content": _text(rng, 800)}
        return "write_file", args, {"ok": True}, [files.change(new)]
    command = ["python", "-m", "pytest", "-q", f"tests/test_{rng.randrange(40)}.py"]
    output = _text(rng, 300) + "\t12 passed in 0.53s\r\n\x1b[32mok\x1b[0m\n"
    response = {"exit_code": rng.choice([0, 0, 0, 1]), "output": output}
    return "run_command", {"command": command}, response, []


def build() -> tuple[list[dict[str, Any]], list[Call], list[Change]]:
    """The sealed entries, the trajectory's calls and the claims (the net effects)."""
    rng = random.Random(8785)
    files = _Files(rng)
    start = datetime(2026, 11, 29, 10, tzinfo=UTC)

    def ts(i: int) -> str:
        return (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")

    bodies: list[dict[str, Any]] = [{"kind": "session_start", "ts": ts(0)}]
    calls: list[Call] = []
    net: dict[str, list[str | None]] = {}
    for i in range(1, ENTRIES - 1):
        tool, args, response, effects = _call(rng, files, i)
        call_id = f"c{i}"
        calls.append(Call(call_id, tool, args, response))
        for e in effects:
            net.setdefault(e["path"], [e["sha256_before"], None])[1] = e["sha256_after"]
        bodies.append(
            {
                "kind": "tool_call",
                "ts": ts(i),
                "call_id": call_id,
                "tool": tool,
                "args_sha256": audit.jcs_sha256(args),
                "decision": "confirmed" if tool == "run_command" else "allow",
                "checkpoint": f"stash@{{{i}}}" if effects else None,
                "result_sha256": audit.jcs_sha256(response),
                "effects": effects,
            }
        )
    bodies.append({"kind": "session_end", "ts": ts(ENTRIES - 1), "status": "done"})
    entries = audit.seal(SESSION, bodies)
    claims = [Change(p, b, a) for p, (b, a) in sorted(net.items()) if b != a]
    return entries, calls, claims


def run(_tmp: Path, repeat: int) -> Result:
    entries, calls, claims = build()
    trail = {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]}
    blobs = [json.dumps(e).encode() for e in entries]

    def verify() -> None:
        findings = audit.verify_trail(trail, session_id=SESSION, calls=calls, claims=claims)
        assert not findings, findings[:3]

    def chain() -> None:
        audit.verify_chain(entries, session_id=SESSION, count=len(entries), head=trail["head"])

    def completeness() -> None:
        audit.check_completeness(entries, calls, claims)

    bodies = [{k: v for k, v in e.items() if k != "hash"} for e in entries]

    def encode_and_hash() -> None:
        # The fast encoder (orjson) and SHA-256 over every value the trail needs hashed, no checks.
        for body in bodies:
            hashlib.sha256(audit.ENTRY_DOMAIN + jcs._encode(body)).hexdigest()
        for c in calls:
            hashlib.sha256(jcs._encode(c.args)).hexdigest()
            hashlib.sha256(jcs._encode(c.response)).hexdigest()

    def raw() -> None:
        for blob in blobs:
            hashlib.sha256(blob).hexdigest()

    runs = {
        "verify": verify,
        "chain": chain,
        "completeness": completeness,
        "encode": encode_and_hash,
        "raw": raw,
    }
    t = measure(runs, repeat)
    raw_name = f"sha256 of the {ENTRIES:,} entries' JSON bytes"
    floor_name = "orjson-encoded JCS + SHA-256 of all, no checks"
    target = f"<= {TARGET:g}x"
    rows = [
        Row(
            "audit",
            "verify_trail",
            t["verify"],
            floor_name,
            t["encode"],
            target,
            TARGET * t["encode"],
        ),
        Row("audit", "verify_trail", t["verify"], raw_name, t["raw"]),
        Row("audit", "of which verify_chain", t["chain"], raw_name, t["raw"]),
        Row("audit", "of which check_completeness", t["completeness"], raw_name, t["raw"]),
        Row("audit", floor_name, t["encode"], raw_name, t["raw"]),
    ]
    facts = {
        "entries": f"{len(entries):,}, {sum(map(len, blobs)) // len(blobs)} JSON bytes on average",
        "calls": f"{len(calls):,}, with {len(claims):,} net file changes claimed",
    }
    return Result(rows, facts)
