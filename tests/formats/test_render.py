"""What people and scripts read: every finding code and check status, in text and JSON."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from tests.support.paths import ROOT
from verifier.app.pipeline import EXIT_CODES, Outcome
from verifier.findings import (
    CheckResult,
    CheckStatus,
    DeliveryStatus,
    Finding,
    Verification,
    decide,
)
from verifier.formats import render

H1, H2 = "a" * 64, "b" * 64
NOW = datetime(2026, 11, 29, 10, tzinfo=UTC)
CODES = sorted(
    set(
        re.findall(
            r"^\| `((?:change|tests|audit)\.[a-z_]+)` \|",
            (ROOT / "docs" / "findings.md").read_text(encoding="utf-8"),
            re.MULTILINE,
        )
    )
)
# What each check really puts in its details, in its outcomes: the renderers must take any.
DETAILS = [
    {},
    {"reason": "no head state to test"},
    {"claimed": 1, "changed": 2, "mode": "commit"},
    {"exit_code": None, "timed_out": True, "duration_s": 3.0, "counts": None},
    {"exit_code": 0, "timed_out": False, "counts": None, "tests_counted": False},
    {"exit_code": 1, "counts": {"passed": 1, "failed": 1}, "output_excerpt": "1 failed\n"},
    {"entries": 4, "calls": 2, "profile": "default", "unknown_calls": ["frobnicate"]},
    {"argv": ["x"], "counts": "garbled", "exit_code": "?"},
]


def verification(name: str, result: CheckResult) -> Verification:
    others = {n: CheckResult(n, CheckStatus.PASS) for n in ("changes", "tests", "audit")}
    checks = {**others, name: result}
    return Verification(
        "s-1", "done", True, decide(list(checks.values())), checks, NOW, NOW, "0.1.0"
    )


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("status", list(CheckStatus))
def test_every_code_and_status_renders_in_both_formats_with_the_verdicts_exit_code(
    code: str, status: CheckStatus
) -> None:
    name = {"change": "changes", "tests": "tests", "audit": "audit"}[code.split(".")[0]]
    finding = Finding(code, f"{code} happened", "a/b.py", H1, H2)
    for details in DETAILS:
        result = CheckResult(name, status, (finding,), dict(details), notes=("a note",))
        v = verification(name, result)
        text = render.verification_text(v, "stored as run 1", width=200)
        assert code in text and "a note" in text
        assert f"verdict: {v.delivery_status.value.replace('_', ' ')}" in text
        data = json.loads(render.verification_json(v, "stored as run 1"))
        assert data["checks"][name]["findings"][0]["code"] == code
        assert data["checks"][name]["status"] == status.value
        outcome = Outcome(v, 1, "stored as run 1")
        expected = {CheckStatus.FAIL: 1, CheckStatus.PASS: 0}.get(status, 3)
        assert outcome.exit_code == expected == EXIT_CODES[DeliveryStatus(data["delivery_status"])]


def test_a_delivery_that_could_not_be_stored_exits_3() -> None:
    v = verification("audit", CheckResult("audit", CheckStatus.PASS))
    assert Outcome(v, None, "not stored: database down").exit_code == 3
    assert Outcome(v, None, "not stored (--no-store)").exit_code == 0


def test_a_test_timeout_and_an_uncounted_runner_render_as_text() -> None:
    """Both used to crash the text view (exit 4): `counts` is None there."""
    timeout = CheckResult(
        "tests",
        CheckStatus.FAIL,
        (Finding("tests.timeout", "killed"),),
        {"exit_code": None, "timed_out": True, "duration_s": 60.2, "counts": None},
    )
    text = render.verification_text(verification("tests", timeout), width=200)
    assert "tests not counted; killed at the timeout after 60.2s" in text
    uncounted = CheckResult(
        "tests",
        CheckStatus.ERROR,
        (Finding("tests.uncounted", "exited 0"),),
        {"exit_code": 0, "timed_out": False, "counts": None},
    )
    text = render.verification_text(verification("tests", uncounted), width=200)
    assert "tests not counted; exit 0" in text and "verdict: inconclusive" in text


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
    out = render.verification_text(v, "stored as run 7", width=200)
    assert "verdict: not delivered" in out and "agent: terminé (done)" in out
    assert "expected aaaaaaaaaaaa…  found bbbbbbbbbbbb…" in out
    assert H1 not in out
    assert "| 1 failed, 1 passed" in out and "| line 19" in out and "line 10" not in out
    assert "stored as run 7" in out


def test_a_check_nobody_renders_yet_still_shows() -> None:
    """Adding a check needs no edit to the renderers."""
    replay = CheckResult("replay", CheckStatus.FAIL, (Finding("replay.mismatch", "line 3"),))
    v = verification("audit", CheckResult("audit", CheckStatus.PASS))
    v = Verification(
        v.session_id, v.agent_status, v.done, DeliveryStatus.NOT_DELIVERED,
        {**v.checks, "replay": replay}, NOW, NOW, "0.1.0",
    )  # fmt: skip
    assert "replay.mismatch" in render.verification_text(v, width=200)
    assert json.loads(render.verification_json(v))["checks"]["replay"]["status"] == "fail"
