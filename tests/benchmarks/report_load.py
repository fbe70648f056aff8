"""Benchmark 4: loading session reports of 2 to 17 MB against `json.loads` of their bytes.

The data: four reports of 1,000, 2,500, 5,000 and 10,000 tool calls (1.7, 4.3,
8.5 and 16.9 MB). Each call is a model turn (a function call, a third of them
with a thought signature in base64, a fifth with a line of text) and a user
turn with its function response, drawn from the same mix of tools as the audit
benchmark (file text with non-ASCII characters, searches, edits, command
output); the audit trail is sealed over them with `audit.seal`, and the claims
are the net file changes. The contents are in the SDK's snake_case, as the
reference harness writes them.

The subject is `verifier.contract.report.parse_report(raw)`: UTF-8, JSON with its
checks (duplicate keys, constants), the contract's models, and the trajectory
loaded with the SDK's `types.Content`. Loading pauses the garbage collector
(`verifier.contract.trajectory.gc_paused`) and leaves what it built unscanned in the
oldest generation; a full collection while the report is alive scans it once,
and that is timed on its own row (`gc.collect()` right after loading the
largest report). The raw operation is `json.loads` of the same bytes. Two
targets: the 10,000-call report loads in 0.8 s or less, and the time per MB
does not grow with the size (the largest report's time per MB within 1.25
times the smallest's).
"""

from __future__ import annotations

import base64
import gc
import json
import random
from pathlib import Path
from typing import Any

import audit
from tests.benchmarks.audit_trail import _call, _Files
from tests.benchmarks.timing import Result, Row, measure
from verifier.contract.report import parse_report

SIZES = (1_000, 2_500, 5_000, 10_000)  # tool calls
TARGET_S = 0.8  # for the 10,000-call report
TARGET_LINEAR = 1.25  # time per MB at 20 MB over time per MB at 2 MB
SESSION = "s-bench-report-0001"
_ACTION = {(False, True): "create", (True, True): "modify", (True, False): "delete"}


def build(calls: int) -> bytes:
    """The bytes of a valid report of `calls` tool calls (seeded: the same every run)."""
    rng = random.Random(calls)
    files = _Files(rng)
    contents: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": "Refactor the package."}]}
    ]
    bodies: list[dict[str, Any]] = [{"kind": "session_start", "ts": _ts(0)}]
    net: dict[str, list[str | None]] = {}
    for i in range(1, calls + 1):
        tool, args, response, effects = _call(rng, files, i)
        call_id = f"c{i}"
        part: dict[str, Any] = {"function_call": {"id": call_id, "name": tool, "args": args}}
        if i % 3 == 0:
            part["thought_signature"] = base64.b64encode(rng.randbytes(48)).decode()
        parts = [part] if i % 5 else [{"text": f"Now step {i}."}, part]
        contents.append({"role": "model", "parts": parts})
        answer = {"id": call_id, "name": tool, "response": response}
        contents.append({"role": "user", "parts": [{"function_response": answer}]})
        for e in effects:
            net.setdefault(e["path"], [e["sha256_before"], None])[1] = e["sha256_after"]
        bodies.append(
            {
                "kind": "tool_call",
                "ts": _ts(i),
                "call_id": call_id,
                "tool": tool,
                "args_sha256": audit.jcs_sha256(args),
                "decision": "confirmed" if tool == "run_command" else "allow",
                "checkpoint": None,
                "result_sha256": audit.jcs_sha256(response),
                "effects": effects,
            }
        )
    contents.append({"role": "model", "parts": [{"text": "Done."}]})
    bodies.append({"kind": "session_end", "ts": _ts(calls + 1), "status": "done"})
    entries = audit.seal(SESSION, bodies)
    changes = [
        {
            "path": p,
            "action": _ACTION[b is not None, a is not None],
            "sha256_before": b,
            "sha256_after": a,
        }
        for p, (b, a) in sorted(net.items())
        if b != a and (b, a) != (None, None)
    ]
    report = {
        "schema_version": "1",
        "session_id": SESSION,
        "agent": {"name": "bench-agent", "version": "1.0", "tool_profile": "default"},
        "task": "Refactor the package.",
        "repo": {"name": "bench", "base_commit": "a" * 40, "head_commit": "b" * 40},
        "started_at": _ts(0),
        "ended_at": _ts(calls + 1),
        "status": "done",
        "final_text": "Done.",
        "usage": {"turns": calls + 1, "tool_calls": calls},
        "changes": changes,
        "trajectory": {"format": "gemini-contents", "contents": contents},
        "audit": {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]},
    }
    return json.dumps(report, ensure_ascii=False).encode("utf-8")


def _ts(second: int) -> str:
    minutes, s = divmod(second, 60)
    hours, m = divmod(minutes, 60)
    return f"2026-11-29T{10 + hours:02d}:{m:02d}:{s:02d}Z"


def run(_tmp: Path, repeat: int) -> Result:
    raws = {n: build(n) for n in SIZES}
    for n, raw in raws.items():
        calls = parse_report(raw).trajectory.calls
        assert len(calls) == n, (n, len(calls))
        assert all(c.response is not None for c in calls)
    del calls  # a report kept alive would be rescanned by every collection timed below

    def parse_then_collect(raw: bytes) -> None:
        report = parse_report(raw)
        gc.collect()  # with the report alive: it is scanned once here
        del report

    runs: dict[str, Any] = {}
    for n, raw in raws.items():
        runs[f"parse {n}"] = lambda raw=raw: parse_report(raw)
        runs[f"loads {n}"] = lambda raw=raw: json.loads(raw)
    largest = SIZES[-1]
    runs["collect"] = lambda: parse_then_collect(raws[largest])
    t = measure(runs, repeat)

    rows: list[Row] = []
    per_mb: dict[int, float] = {}
    for n, raw in raws.items():
        mb = len(raw) / 1e6
        per_mb[n] = t[f"parse {n}"] / mb
        last = n == SIZES[-1]
        rows.append(
            Row(
                "report",
                f"parse_report, {n:,} calls ({mb:.1f} MB)",
                t[f"parse {n}"],
                "json.loads of the same bytes",
                t[f"loads {n}"],
                f"<= {TARGET_S:g} s" if last else "-",
                TARGET_S if last else None,
            )
        )
    small, large = SIZES[0], SIZES[-1]
    rows.append(
        Row(
            "report",
            f"parse_report, {large:,} calls, then gc.collect() (report alive)",
            t["collect"],
            "json.loads of the same bytes",
            t[f"loads {large}"],
        )
    )
    rows.append(
        Row(
            "report",
            f"parse_report per MB, {large:,} calls",
            per_mb[large],
            f"parse_report per MB, {small:,} calls",
            per_mb[small],
            f"<= {TARGET_LINEAR:g}x",
            TARGET_LINEAR * per_mb[small],
        )
    )
    facts = {
        "sizes": ", ".join(f"{n:,} calls = {len(r) / 1e6:.1f} MB" for n, r in raws.items()),
        "time per MB": ", ".join(f"{per_mb[n] * 1000:.0f} ms" for n in SIZES)
        + " (parse_report, smallest to largest)",
        "json.loads per MB": ", ".join(
            f"{t[f'loads {n}'] / (len(raws[n]) / 1e6) * 1000:.0f} ms" for n in SIZES
        ),
    }
    return Result(rows, facts)
