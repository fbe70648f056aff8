"""A session verified without an audit trail that its repository accepts (`trail =
"optional"`) passes the gate, and the gate says what that verdict rests on: the audit
check's note, in text, JSON and JUnit, read from the local store and from a real server
(issue 17: the verdict notes it everywhere it is shown)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.support.api import T0
from tests.support.gate import Project, gate
from tests.support.report_factory import finished, report_dict
from verifier.app import pipeline
from verifier.checks.audit import no_trail
from verifier.config import Config, RepositoryConfig
from verifier.contract.profiles import load_profile
from verifier.contract.report import parse_report
from verifier.findings import CheckResult, CheckStatus, Finding

NONE = {"trail": "none", "entries": [], "count": 0, "head": None}
CALL = {
    "role": "model",
    "parts": [{"functionCall": {"id": "c1", "name": "write_todos", "args": {"todos": []}}}],
}


def _record_without_a_trail(project: Project, session_id: str, *, tests_fail: bool) -> None:
    """Store a report made without a trail (as `gemini-cli import` writes one) and record
    its run, the audit check's result computed by the check itself under trail = optional."""
    repo = {"name": "calc", "base_commit": project.base, "head_commit": project.head}
    trajectory = {"format": "gemini-contents", "contents": [CALL]}
    raw = json.dumps(report_dict(session_id, repo=repo, audit=NONE, trajectory=trajectory)).encode()
    report = parse_report(raw)
    config = Config()
    audit = no_trail(
        report,
        load_profile(config.profiles_dir, "default"),
        RepositoryConfig(name="calc", trail="optional"),
        config,
    )
    assert audit.status is CheckStatus.PASS and audit.notes  # what the gate must show
    tests = (
        CheckResult("tests", CheckStatus.FAIL, (Finding("tests.failed", "1 of 3 failed"),))
        if tests_fail
        else CheckResult("tests", CheckStatus.PASS)
    )
    checks = {"changes": CheckResult("changes", CheckStatus.PASS), "tests": tests, "audit": audit}
    with project.store() as store:
        _, created = pipeline.submit(store, raw, f"test:{session_id}")
        assert created
        store.record_run(finished(session_id, checks, T0, seconds=2))
    project.sessions.append(session_id)


def flat(text: str) -> str:
    """The text with its wrapping undone (rich folds long lines at the console's width)."""
    return " ".join(text.split())


def test_a_delivered_session_without_a_trail_shows_the_audit_note(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    _record_without_a_trail(project, "s-none", tests_fail=False)
    project.ingest("s-trail")
    project.record("s-trail", "delivered")
    args = ["--commit", project.head, "--repo", str(project.repo.path)]

    text = gate(capsys, *args)
    assert text.code == 0, text.out + text.err
    # The session passes, and its own lines say what the pass rests on.
    assert (
        "s-none: delivered (does not block) note: no audit trail (audit.trail = 'none'), "
        "accepted by the repository's trail = 'optional'" in flat(text.out)
    )
    assert "s-trail:" not in text.out  # a plain pass: no lines of its own

    data = gate(capsys, *args, "--format", "json").json()
    by_id = {s["session_id"]: s for s in data["sessions"]}
    note = by_id["s-none"]["trail_note"]
    assert note.startswith("no audit trail (audit.trail = 'none'), accepted by the repository")
    assert by_id["s-trail"]["trail_note"] is None

    junit = gate(capsys, *args, "--format", "junit")
    cases = {c.get("name"): c for c in ET.fromstring(junit.out).iter("testcase")}
    assert "note: no audit trail" in (cases["s-none"].findtext("system-out") or "")
    assert "note:" not in (cases["s-trail"].findtext("system-out") or "")


@pytest.mark.parametrize("source", ["store", "server"])
def test_a_blocked_session_without_a_trail_shows_the_note_beside_its_findings(
    source: str,
    project: Project,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _record_without_a_trail(project, "s-none", tests_fail=True)
    args = ["--commit", project.head, "--repo", str(project.repo.path)]
    if source == "server":
        live = request.getfixturevalue("live")
        monkeypatch.setenv("VERIFIER_TOKEN", live.tokens["read"])
        args += ["--server", live.url]
    ran = gate(capsys, *args)
    assert ran.code == 1, ran.out + ran.err
    assert (
        "s-none: not delivered (blocks) note: no audit trail (audit.trail = 'none'), "
        "accepted" in flat(ran.out)
    )
    assert "replay checks - tests.failed: 1 of 3 failed" in flat(ran.out)
    [session] = gate(capsys, *args, "--format", "json").json()["sessions"]
    assert [f["code"] for f in session["findings"]] == ["tests.failed"]
    assert session["trail_note"].startswith("no audit trail")
