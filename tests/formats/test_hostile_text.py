"""What a session wrote, fed through every field of every format: nothing of it starts a
GitHub workflow command, and no raw control character of it reaches the output."""

from __future__ import annotations

import json
import re
import unicodedata
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from verifier.app.gate import GateSelection, GateSession, StandingOverride, decide
from verifier.app.sessions import Listing, SessionView
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding, Verification
from verifier.findings import decide as verdict
from verifier.formats import render
from verifier.formats.gate import render_github, render_json, render_junit, render_sarif
from verifier.formats.gate import render_text as gate_text
from verifier.store import Counts, RunRow, SessionRow
from verifier.store.overrides import OverrideRow

NOW = datetime(2026, 11, 29, 10, tzinfo=UTC)
HEAD = "9a2e" * 10
# Every way a string ends a line, starts a command, moves a cursor or reorders text.
HOSTILE = (
    "p\n::add-mask::secret\r\n::stop-commands::x\n::error file=a.py,line=1::forged"
    "\x1b[2J\x1b]0;title\x07\u2028::warning::w\u0085::notice::n\u2029::debug::d"
    "\u202e##[error]legacy\x00\x7f\x9b\x08\t::group::g\u2066"
)
# The same, where only a layout that wraps long lines would put it at a line's start.
WRAPPED = "x" * 150 + " ::error::wrapped " + "y" * 130 + "  ::add-mask::wrapped"
SPACED = "   ::error::spaced"
STRINGS = [HOSTILE, WRAPPED, SPACED]
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# A workflow command as GitHub's runner reads one: `::` at the start after white space,
# or the legacy `##[` anywhere in the line.
COMMAND = re.compile(r"^\s*::|##\[")


def raw_controls(text: str) -> list[str]:
    """The control and reordering characters of `text`, its newlines apart."""
    return [
        f"U+{ord(c):04X}"
        for c in text
        if c != "\n" and (unicodedata.category(c) == "Cc" or c in "\u2028\u2029" or c in BIDI)
    ]


def commands(text: str) -> list[str]:
    return [line for line in text.split("\n") if COMMAND.search(line)]


def assert_inert(text: str, ours: tuple[str, ...] = ()) -> None:
    assert raw_controls(text) == []
    assert commands(text) == list(ours)


def gate_session(n: int, hostile: str) -> GateSession:
    finding = Finding("change.missing", hostile, hostile, hostile, hostile)
    return GateSession(
        session_id=f"s-{n}{hostile}",
        computed_status=("not_delivered", "inconclusive", "pending", "delivered")[n % 4],
        override=StandingOverride("delivered", hostile, hostile) if n == 3 else None,
        repo_name=hostile,
        head_commit=HEAD,
        branch=hostile,
        agent_status=hostile,
        findings=(finding, Finding("audit.seq_gap", hostile, hostile, None, hostile)),
    )


def gate_decision(hostile: str):  # type: ignore[no-untyped-def]
    selection = GateSelection(session_ids=(hostile,), branches=(hostile,), commits=(HEAD,))
    sessions = [gate_session(n, hostile) for n in range(5)]
    return decide(sessions, selection, inconclusive="fail", source=hostile)


@pytest.mark.parametrize("hostile", STRINGS, ids=["controls", "wrapped", "spaced"])
def test_the_gates_text_json_junit_and_sarif_start_no_command_and_hold_no_raw_control(
    hostile: str,
) -> None:
    decision = gate_decision(hostile)
    for width in (80, 120, 200):
        assert_inert(gate_text(decision, width=width))
    for document in (render_json(decision), render_sarif(decision)):
        assert_inert(document)
        assert "secret" in document or hostile is not HOSTILE  # the data is still there
    # JSON loses nothing: the values read back are what the session wrote.
    data = json.loads(render_json(decision))
    assert data["sessions"][0]["branch"] == hostile
    assert data["sessions"][0]["findings"][0]["path"] == hostile
    sarif = json.loads(render_sarif(decision))
    assert sarif["runs"][0]["properties"]["source"] == hostile
    junit = render_junit(decision)
    assert_inert(junit)
    ET.fromstring(junit)  # still valid XML


@pytest.mark.parametrize("hostile", STRINGS, ids=["controls", "wrapped", "spaced"])
def test_github_runs_only_its_own_commands_and_stops_command_processing_around_the_rest(
    hostile: str,
) -> None:
    decision = gate_decision(hostile)
    output = render_github(decision, end_token="tok3n")
    stop, end = "::stop-commands::tok3n", "::tok3n::"
    lines = output.stdout.split("\n")
    annotations = lines[: lines.index(stop)]
    assert len(annotations) == len(output.annotations) > 0
    assert_inert(output.stdout, (*annotations, stop, end))
    assert lines[-2:] == [end, ""]  # the end token closes the output
    for line in annotations:
        # One command each, of our three, with our three properties: GitHub's escaping
        # leaves no `::` or `,` in a property value to end it early.
        match = re.fullmatch(r"::(error|warning|notice) ([^:]*)::(.*)", line)
        assert match is not None, line
        keys = [p.split("=", 1)[0] for p in match.group(2).split(",")]
        assert set(keys) <= {"file", "line", "title"} and len(keys) == len(set(keys))
    assert raw_controls(output.summary) == []
    assert not re.search(r"^\s*::", output.summary, re.M)


def test_each_run_draws_its_own_end_token() -> None:
    decision = gate_decision(HOSTILE)
    tokens = {render_github(decision).end_token for _ in range(3)}
    assert len(tokens) == 3 and all(len(t) == 32 for t in tokens)


def hostile_verification(hostile: str) -> Verification:
    finding = Finding("change.missing", hostile, hostile, hostile, hostile)
    tests = CheckResult(
        "tests",
        CheckStatus.FAIL,
        (finding,),
        {"exit_code": 1, "counts": {"failed": 1}, "output_excerpt": f"E {hostile}\n{hostile}"},
        notes=(hostile,),
    )
    audit = CheckResult(
        "audit", CheckStatus.PASS, (), {"entries": 1, "calls": 1, "unknown_calls": [hostile]}
    )
    changes = CheckResult("changes", CheckStatus.ERROR, (finding,), {"reason": hostile})
    checks = {"changes": changes, "tests": tests, "audit": audit}
    return Verification(
        f"s{hostile}", hostile, True, verdict(list(checks.values())), checks, NOW, NOW, "0.1.0"
    )


def hostile_view(hostile: str) -> SessionView:
    row = SessionRow(
        session_id=f"s{hostile}",
        agent_name=hostile,
        agent_version=hostile,
        agent_model=hostile,
        tool_profile=hostile,
        repo_name=hostile,
        base_commit="6f1c" * 10,
        head_commit=None,
        raw_status=hostile,
        status="done",
        done=True,
        started_at=NOW,
        ended_at=NOW,
        report_sha256="a" * 64,
        ingested_at=NOW,
        override_status="delivered",
    )
    finding = Finding("change.missing", hostile, hostile, hostile, hostile)
    run = RunRow(
        id=1,
        session_id=row.session_id,
        verifier_version="0.1.0",
        delivery_status=DeliveryStatus.NOT_DELIVERED,
        checks={"changes": CheckStatus.FAIL},
        started_at=NOW,
        finished_at=NOW,
        duration_s=1.0,
        result={},
        findings=(finding,),
    )
    override = OverrideRow(1, row.session_id, NOW, hostile, "delivered", hostile)
    return SessionView.whole(row, [run], [override])


@pytest.mark.parametrize("hostile", STRINGS, ids=["controls", "wrapped", "spaced"])
def test_verify_show_and_list_text_start_no_command_and_hold_no_raw_control(
    hostile: str,
) -> None:
    view = hostile_view(hostile)
    listing = Listing((view,), Counts(total=1, done=1, not_delivered=1), overridden=1)
    for width in (80, 200):
        assert_inert(render.verification_text(hostile_verification(hostile), hostile, width))
        assert_inert(render.session_text(view, width=width))
        assert_inert(render.listing_text(listing, width=width))
    for document in (
        render.verification_json(hostile_verification(hostile)),
        render.session_json(view),
        render.listing_json(listing),
    ):
        assert_inert(document)
    assert json.loads(render.session_json(view))["agent_name"] == hostile


def test_escaped_text_still_shows_what_was_written() -> None:
    finding = Finding("change.missing", "a\nb\u202ec", "p\x1b[2J.py")
    decision = decide(
        [GateSession("s-1", "not_delivered", findings=(finding,))], GateSelection(commits=(HEAD,))
    )
    text = gate_text(decision, width=200)
    assert "p\\x1b[2J.py: a\\x0ab\\u202ec" in text
    assert render.inert("::error::x\n  ::warning::y\nok ##[error]z") == (
        "\\::error::x\n  \\::warning::y\nok ##\\[error]z"
    )


def test_report_check_text_shows_a_quoted_hostile_value_escaped_and_inert() -> None:
    from tests.support.report_factory import report_dict
    from verifier import resources
    from verifier.app.reportcheck import check_report

    doc = report_dict("s-1")
    doc["usage"] = {"turns": "1\u2028::add-mask::x\u0085##[error]y\x1b[2J"}
    checked = check_report(json.dumps(doc, ensure_ascii=False).encode(), resources.profiles_dir())
    assert checked.invalid is not None and checked.invalid.field == "usage.turns"
    text = render.report_check_text(checked)
    assert_inert(text)
    assert "\\u2028::add-mask::x\\x85##\\[error]y" in text
