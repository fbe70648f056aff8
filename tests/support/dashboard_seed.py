"""A store seeded for the dashboard's tests: sessions of several agents, models,
repositories and days, in every state, and one rich session whose findings point
at a claimed change, a call and an audit entry."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.api import verification
from tests.support.report_factory import report_dict
from verifier.contract.report import parse_report
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding
from verifier.store import Store
from verifier.store.overrides import record_override

XSS = "<script>alert(1)</script>"
DAY0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
RICH = "rich-1"


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _report(
    session_id: str,
    *,
    agent: str,
    model: str | None,
    repo: str,
    ended: datetime,
    status: str = "done",
    **extra: Any,
) -> bytes:
    doc = report_dict(
        session_id,
        status,
        started_at=_stamp(ended - timedelta(minutes=5)),
        ended_at=_stamp(ended),
        **extra,
    )
    doc["agent"] = {"name": agent, "version": "1.0", "model": model, "tool_profile": "default"}
    doc["repo"] = {**doc["repo"], "name": repo}
    return json.dumps(doc).encode()


# (session id, agent, model, repo, day offset, agent status, verdict or None for pending)
PLAN: list[tuple[str, str, str | None, str, int, str, str | None]] = [
    ("a-1", "repo-fixer", "gemini-2.5-pro", "calc", 0, "done", "delivered"),
    ("a-2", "repo-fixer", "gemini-2.5-pro", "calc", 0, "done", "not_delivered"),
    ("a-3", "repo-fixer", "gemini-2.5-flash", "calc", 1, "done", "delivered"),
    ("a-4", "repo-fixer", "gemini-2.5-flash", "shop", 1, "error", "not_delivered"),
    ("a-5", "repo-fixer", None, "shop", 2, "done", "inconclusive"),
    ("b-1", "patcher", "gemini-2.5-pro", "shop", 2, "done", "not_delivered"),
    ("b-2", "patcher", "gemini-2.5-pro", "shop", 3, "done", "delivered"),
    ("b-3", "patcher", "gemini-2.5-flash", "calc", 4, "done", None),
    ("b-4", "patcher", "gemini-2.5-flash", "calc", 4, "stuck", "delivered"),
    ("x-1", XSS, XSS, XSS, 3, "done", "not_delivered"),
    # Long before the others: over all time, the chart shows weeks.
    ("o-1", "patcher", "gemini-2.5-pro", "old", -200, "done", "delivered"),
]


def _rich_report() -> bytes:
    call = {"id": "c1", "name": "write_file", "args": {"path": "calc.py", "content": "x = 1\n"}}
    reply = {"id": "c1", "name": "write_file", "response": {"ok": True}}
    read = {"id": "c2", "name": "read_file", "args": {"path": XSS}}
    contents = [
        {"role": "user", "parts": [{"text": "fix calc"}]},
        {"role": "model", "parts": [{"function_call": call}]},
        {"role": "user", "parts": [{"function_response": reply}]},
        {"role": "model", "parts": [{"function_call": read}]},
    ]
    entries = [
        {
            "kind": "tool_call",
            "seq": 0,
            "call_id": "c1",
            "tool": "write_file",
            "decision": "allowed",
            "effects": [{"path": "calc.py"}],
        },
        {
            "kind": "tool_call",
            "seq": 1,
            "call_id": "c2",
            "tool": "read_file",
            "decision": "allowed",
            "effects": [],
        },
        {"kind": "session_end", "seq": 2, "status": "done"},
    ]
    changes = [
        {
            "path": "calc.py",
            "action": "modify",
            "sha256_before": "a" * 64,
            "sha256_after": "b" * 64,
        },
        {"path": XSS, "action": "create", "sha256_before": None, "sha256_after": "c" * 64},
    ]
    return _report(
        RICH,
        agent="repo-fixer",
        model="gemini-2.5-pro",
        repo="calc",
        ended=DAY0 + timedelta(days=4, hours=2),
        task="make calc add",
        changes=changes,
        trajectory={"format": "gemini-contents", "contents": contents},
        audit={"entries": entries, "count": 3, "head": None},
    )


RICH_FINDINGS = (
    Finding("change.missing", "calc.py is not at head", "calc.py", "b" * 64, "a" * 64),
    Finding("audit.hash_mismatch", "entry 1's hash is not its own", "audit.entries[1].hash"),
    Finding(
        "audit.response_missing", "call c2 (read_file) has no function_response", expected="c2"
    ),
    Finding(
        "audit.call_outside_model_turn",
        "a call in a user turn",
        "trajectory.contents.1.parts.0",
        "model",
        "user",
    ),
)
# Where each of RICH_FINDINGS points on the session page (the tests finding points nowhere).
RICH_TARGETS = {0: "change-0", 2: "entry-1", 3: "call-1", 4: "call-0"}


def ingest_at(
    store: Store, session_id: str, ended: datetime, *, agent: str, verdict: str | None = None
) -> None:
    """Store one more session of `agent` that ended at `ended`, verified to `verdict`
    (delivered or not_delivered) when given."""
    raw = _report(session_id, agent=agent, model="gemini-2.5-pro", repo="calc", ended=ended)
    store.ingest(parse_report(raw))
    if verdict is not None:
        run = verification(
            session_id, failed=verdict == "not_delivered", started_at=ended + timedelta(minutes=1)
        )
        store.record_run(run)


def seed(url: str) -> None:
    """Fill the store at `url` with `PLAN`, the rich session and one override."""
    with Store.open(url) as store:
        for sid, agent, model, repo, day, status, verdict in PLAN:
            ended = DAY0 + timedelta(days=day, hours=1)
            raw = _report(sid, agent=agent, model=model, repo=repo, ended=ended, status=status)
            store.ingest(parse_report(raw))
            if verdict is None:
                continue
            run = verification(
                sid,
                failed=verdict == "not_delivered",
                error=verdict == "inconclusive",
                started_at=ended + timedelta(minutes=1),
            )
            if sid == "x-1":
                bad = CheckResult(
                    "changes", CheckStatus.FAIL, (Finding("change.missing", XSS, XSS),)
                )
                run = replace(run, checks={**run.checks, "changes": bad})
            store.record_run(replace(run, agent_status=status, done=status == "done"))
        store.ingest(parse_report(_rich_report()))
        tests = CheckResult(
            "tests",
            CheckStatus.FAIL,
            (Finding("tests.failed", "1 test failed"),),
            details={
                "exit_code": 1,
                "duration_s": 0.8,
                "counts": {"passed": 3, "failed": 1, "errors": 0, "skipped": 2},
                "output_excerpt": "FAILED test_calc.py::test_add - assert 3 == 4\n" + XSS,
                "output_sha256": "d" * 64,
                "output_bytes": 1234,
            },
        )
        first = verification(RICH, error=True, started_at=DAY0 + timedelta(days=4, hours=3))
        store.record_run(first, reason="ingest")
        changes = CheckResult("changes", CheckStatus.FAIL, RICH_FINDINGS[:1])
        audit = CheckResult("audit", CheckStatus.FAIL, RICH_FINDINGS[1:])
        second = replace(
            first,
            checks={"changes": changes, "tests": tests, "audit": audit},
            delivery_status=DeliveryStatus.NOT_DELIVERED,
            started_at=DAY0 + timedelta(days=4, hours=4),
            finished_at=DAY0 + timedelta(days=4, hours=4, seconds=3),
        )
        store.record_run(second, reason="reverify")
        record_override(
            store, "a-2", status="delivered", reason="fixed by hand " + XSS, author="reviewer"
        )
