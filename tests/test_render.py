"""What people read: the text summary of a verification."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from verifier import render
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding, Verification

H1, H2 = "a" * 64, "b" * 64
NOW = datetime(2026, 11, 29, 10, tzinfo=UTC)


def text(v: Verification) -> str:
    console = Console(record=True, width=200, highlight=False)
    render.verification(console, v, "stored as run 7")
    return console.export_text()


def test_failing_session_shows_short_hashes_and_the_end_of_the_test_output() -> None:
    changes = CheckResult(
        "changes",
        CheckStatus.FAIL,
        (Finding("change.hash_mismatch", "calc.py: differs", "calc.py", H1, H2),),
        {"claimed": 1, "changed": 1, "mode": "commit"},
    )
    tests = CheckResult(
        "tests",
        CheckStatus.FAIL,
        (Finding("tests.failed", "exit 1"),),
        {
            "counts": {"passed": 1, "failed": 1},
            "exit_code": 1,
            "network_isolated": True,
            "output_excerpt": "".join(f"line {i}\n" for i in range(20)) + "1 failed, 1 passed\n",
        },
    )
    audit = CheckResult(
        "audit", CheckStatus.PASS, (), {"entries": 4, "calls": 2, "profile": "default"}
    )
    v = Verification(
        "s-1",
        "terminé",
        True,
        DeliveryStatus.NOT_DELIVERED,
        {"changes": changes, "tests": tests, "audit": audit},
        NOW,
        NOW,
        "0.1.0",
    )
    out = text(v)
    assert "verdict: not delivered" in out and "agent: terminé (done)" in out
    assert "expected aaaaaaaaaaaa…  found bbbbbbbbbbbb…" in out
    assert H1 not in out
    assert "| 1 failed, 1 passed" in out and "| line 19" in out and "line 10" not in out
    assert "stored as run 7" in out
