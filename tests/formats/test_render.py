"""What people and scripts read: every finding code and check status, in text and JSON."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from audit.trailfile import TrailCheck
from tests.support.paths import ROOT
from verifier.app.pipeline import EXIT_CODES, Outcome
from verifier.app.sessions import Ingested, Ingestion, Listing, SessionView
from verifier.app.settings import Settings
from verifier.app.tokens import Created, Revoked, TokenView
from verifier.findings import (
    CheckResult,
    CheckStatus,
    DeliveryStatus,
    Finding,
    Verification,
    decide,
)
from verifier.formats import render
from verifier.store import Counts, RunRow, SessionRow
from verifier.store.maintenance import CopyResult, PrunePlan, PruneResult, TableCopy
from verifier.store.overrides import OverrideRow
from verifier.store.tokens import TokenRow
from verifier.store.webhooks import DeliveryRow

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


# -- stored sessions, and the commands' other results -------------------------------------


def session_row(session_id: str = "s-1", override: str | None = None) -> SessionRow:
    return SessionRow(
        session_id=session_id,
        agent_name="repo-fixer",
        agent_version="0.3.0",
        agent_model=None,
        tool_profile="default",
        repo_name="calc",
        base_commit="6f1c" * 10,
        head_commit=None,
        raw_status="terminé",
        status="done",
        done=True,
        started_at=NOW,
        ended_at=NOW,
        report_sha256=H1,
        ingested_at=NOW,
        override_status=override,
    )


def run_row(run_id: int, status: DeliveryStatus, *findings: Finding) -> RunRow:
    return RunRow(
        id=run_id,
        session_id="s-1",
        verifier_version="0.1.0",
        delivery_status=status,
        checks={"changes": CheckStatus.FAIL if findings else CheckStatus.PASS},
        started_at=NOW,
        finished_at=NOW,
        duration_s=1.0,
        result={},
        findings=findings,
    )


MISSING = Finding("change.missing", "calc.py is not at head", "calc.py")


def test_a_session_shows_its_runs_the_verdicts_findings_and_the_override_beside_it() -> None:
    runs = [
        run_row(1, DeliveryStatus.NOT_DELIVERED, MISSING),
        run_row(2, DeliveryStatus.INCONCLUSIVE),
    ]
    override = OverrideRow(1, "s-1", NOW, "cli:al", "delivered", "moved by hand")
    view = SessionView.whole(session_row(override="delivered"), runs, [override])
    text = render.session_text(view, width=200)
    assert "verdict: not delivered" in text and "change.missing calc.py is not at head" in text
    assert "override: delivered (a person's verdict" in text
    assert "cli:al: delivered: moved by hand" in text
    data = json.loads(render.session_json(view))
    assert data == view.to_dict()
    assert (data["delivery_status"], data["effective_status"]) == ("not_delivered", "delivered")
    never = render.session_text(SessionView.whole(session_row(), []), width=200)
    assert "never verified: run `verifier verify` on its report" in never


def test_a_listing_marks_a_later_inconclusive_run_and_an_override() -> None:
    view = SessionView(
        session_row(override="delivered"),
        run_row(1, DeliveryStatus.NOT_DELIVERED, MISSING),
        run_row(2, DeliveryStatus.INCONCLUSIVE),
    )
    listing = Listing((view,), Counts(total=1, done=1, not_delivered=1), overridden=1)
    text = render.listing_text(listing, width=200)
    assert "not delivered (latest run inconclusive) overridden: delivered" in text
    assert "change.missing calc.py" in text and "1 session carries a person's override" in text
    line = json.loads(render.listing_json(listing))["sessions"][0]
    assert line["first_finding"]["code"] == "change.missing" and line["latest_run"]["id"] == 2


def test_ingest_lists_each_report_with_what_became_of_it() -> None:
    done = Ingestion((Ingested("a.json", "stored", "s-1"), Ingested("b.json", "invalid", "", "x")))
    assert "stored" in render.ingest_text(done, width=200)
    assert json.loads(render.ingest_json(done))[1] == {
        "report": "b.json",
        "result": "invalid",
        "session_id": "",
        "message": "x",
    }


def test_tokens_render_without_their_secret_but_with_their_state() -> None:
    token = TokenRow(7, "ci", "read", NOW, "cli:al", None, None)
    view = TokenView(token, NOW)
    assert render.tokens_text([view]).splitlines()[1].split() == [
        "7", "read", "active", "-", "cli:al", "ci",
    ]  # fmt: skip
    created = Created(view, "vrf_secret")
    assert json.loads(render.token_created_json(created))["token"] == "vrf_secret"
    assert "never expires" in render.token_created_note(created)
    assert "vrf_secret" not in render.token_created_note(created)
    revoked = TokenView(dataclasses.replace(token, revoked_at=NOW), NOW)
    assert render.revoked_text(Revoked(revoked, True)) == "token 7 'ci' revoked\n"
    again = render.revoked_text(Revoked(revoked, False))
    assert again == "token 7 'ci' was already revoked at 2026-11-29T10:00:00Z\n"


def test_the_delivery_log_says_when_a_pending_delivery_is_tried_again() -> None:
    row = DeliveryRow(
        3, NOW, "ops", "https://x", "verdict", "s-1", 1, b"{}", "pending", 1, NOW, NOW, 503, None
    )
    line = render.deliveries_text([row]).splitlines()[1]
    assert "HTTP 503; next 2026-11-29T10:00:00Z" in line
    assert render.deliveries_text([]).splitlines()[-1] == "(no deliveries)"
    assert json.loads(render.deliveries_json([row]))["deliveries"][0]["body"] == "{}"


def test_a_trail_is_intact_unfinished_or_broken_at_a_line() -> None:
    path = Path("t.jsonl")
    intact = TrailCheck("intact", 1, "s-1")
    assert render.trail_text(path, intact) == "t.jsonl: intact and complete, 1 intact entry\n"
    cut = TrailCheck("unfinished", 2, "s-1", problem="no session_end")
    assert render.trail_text(path, cut).endswith("2 intact entries: no session_end\n")
    broken = TrailCheck("broken", 2, "s-1", line=3, code="audit.seq_gap", problem="gap")
    assert render.trail_text(path, broken) == (
        "t.jsonl: broken at line 3: gap; 2 intact entries before it\n"
    )
    assert json.loads(render.trail_json(path, broken))["trail"] == "t.jsonl"


def test_the_settings_name_the_file_or_where_one_was_looked_for() -> None:
    searched = (Path("/a/verifier.toml"), Path("/b/verifier.toml"))
    none = render.settings_text(Settings(None, searched, {"database_url": "sqlite://"}))
    assert none.splitlines()[:3] == [
        "file: none (the packaged defaults apply)",
        "searched: /a/verifier.toml, /b/verifier.toml",
        "[verifier]",
    ]
    read = render.settings_text(Settings(Path("/c.toml"), searched, {}))
    assert read.splitlines()[0] == "file: /c.toml" and "searched" not in read


def test_prune_and_copy_say_what_was_done_and_what_was_kept() -> None:
    plan = PrunePlan(NOW, 2, 1024, 3, 1)
    assert render.prune_plan_text(plan, "2026-11-29") == (
        "2 sessions ended before 2026-11-29 (1,024 report bytes, 3 runs); 1 never verified are kept"
    )
    result = PruneResult(NOW, NOW, 2, 1024, 3, 10, 1, 5)
    assert "(1,034 bytes in all)" in render.prune_text(result, "2026-11-29")
    assert "admin log entry 5" in render.prune_text(result, "2026-11-29")
    copied = CopyResult(
        "sqlite:///a", "postgresql://b", (TableCopy("sessions", 2, H1),), 2, 0, 1, 1.5
    )
    text = render.copy_text(copied)
    assert text.startswith("copied sqlite:///a to postgresql://b in 1.5s\n")
    assert "1 sessions are not verified yet" in text


def test_the_demo_shows_each_verdict_the_rates_and_what_to_try() -> None:
    v = verification("audit", CheckResult("audit", CheckStatus.PASS))
    rates = {"sessions": 1, "done": 1, "delivered": 1, "done_rate": 1.0, "delivered_rate": 1.0}
    text = render.demo_text(
        [v], rates, store="d/v.sqlite3", example="verifier verify x", page="d/i.html", browse=["b"]
    )
    assert "s-1" in text and "delivered rate 100% (1 of 1)" in text
    assert "stored in d/v.sqlite3; try: verifier verify x" in text
    assert "the same view as a page: d/i.html" in text and "browse it live: b" in text


CLASSIFIED = {
    "classification": {
        "counts": {
            "fixed": 3,
            "broken": 0,
            "still_failing": 1,
            "still_passing": 40,
            "new": 0,
            "removed": 0,
        },
        "tests": {"fixed": ["a", "b", "c"], "still_failing": ["d"]},
    },
    "exit_code": 1,
    "counts": {"passed": 43, "failed": 1},
}


def test_a_differential_run_shows_one_line_of_what_the_change_did_to_the_tests() -> None:
    tests = CheckResult("tests", CheckStatus.PASS, details=CLASSIFIED)
    v = verification("tests", tests)
    line = "classified: fixed 3, broken 0, still failing 1, still passing 40, new 0, removed 0"
    assert line in render.verification_text(v, width=200)
    data = json.loads(render.verification_json(v))
    assert data["checks"]["tests"]["details"]["classification"]["counts"]["fixed"] == 3
    # Stored, the session shows it under its verdict; a run without one shows no such line.
    run = dataclasses.replace(
        run_row(1, DeliveryStatus.DELIVERED), result=json.loads(render.verification_json(v))
    )
    assert line in render.session_text(SessionView.whole(session_row(), [run]), width=200)
    plain = render.session_text(
        SessionView.whole(session_row(), [run_row(1, DeliveryStatus.DELIVERED)]), width=200
    )
    assert "classified:" not in plain
    assert render.classification_line({"classification": "garbled"}) == ""
