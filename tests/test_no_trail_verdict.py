"""A session verified without an audit trail that its repository accepts (`trail =
"optional"`): its verdict rests on the report's word for the calls, and every face that
shows the verdict says so with the audit check's note (``verifier show`` in text and
JSON, ``verifier list``, the API's session, the dashboard's session page and lists).

The report is the one ``verifier gemini-cli import`` writes (`audit.trail = "none"`),
built here directly; its audit result comes from the audit check itself (`no_trail`).
A recorded trail, and a missing trail the repository does not accept (inconclusive,
the finding ``audit.no_trail`` speaks), carry no note.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from tests.support.api import bearer, make_config, make_tokens
from tests.support.pages import login, table
from tests.support.report_factory import finished, make_report_bytes
from verifier.app import pipeline, sessions
from verifier.checks.audit import no_trail
from verifier.config import Config, RepositoryConfig
from verifier.contract.profiles import load_profile
from verifier.contract.report import parse_report
from verifier.findings import CheckResult, CheckStatus, Finding
from verifier.service.api import create_app
from verifier.store import Store

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
NONE = {"trail": "none", "entries": [], "count": 0, "head": None}
CALL = {
    "role": "model",
    "parts": [{"functionCall": {"id": "c1", "name": "write_todos", "args": {"todos": []}}}],
}
# Accepted without a trail; refused without one (inconclusive); a recorded trail; and
# accepted without a trail but not delivered (a silent failure: done, a change missing).
ACCEPTED, REFUSED, RECORDED, SILENT = "nt-accepted", "nt-refused", "recorded", "nt-silent"
MISSING = Finding("change.missing", "calc.py is not at head", "calc.py")
NOTE = "no audit trail (audit.trail = 'none'), accepted by the repository's trail = 'optional'"


def _store(url: str) -> None:
    """The three sessions, each verified once; the audit results of the two without a
    trail are the audit check's own, under each policy."""
    profile = load_profile(Config().profiles_dir, "gemini-cli-0.61-legacy")
    passed = {n: CheckResult(n, CheckStatus.PASS) for n in ("changes", "tests")}
    failed = {**passed, "changes": CheckResult("changes", CheckStatus.FAIL, (MISSING,))}
    trajectory = {"format": "gemini-contents", "contents": [CALL]}
    with Store.open(url) as store:
        for session_id, trail, ran in (
            (ACCEPTED, "optional", passed),
            (REFUSED, "required", passed),
            (SILENT, "optional", failed),
        ):
            raw = make_report_bytes(session_id, audit=NONE, trajectory=trajectory)
            pipeline.submit(store, raw, f"test:{session_id}")
            repo = RepositoryConfig(name="calc", trail=trail)
            audit = no_trail(parse_report(raw), profile, repo, Config())
            store.record_run(finished(session_id, {**ran, "audit": audit}, T0))
        pipeline.submit(store, make_report_bytes(RECORDED), f"test:{RECORDED}")
        audit = CheckResult("audit", CheckStatus.PASS)
        store.record_run(finished(RECORDED, {**passed, "audit": audit}, T0))


@pytest.fixture
def url(db_url: str) -> str:
    _store(db_url)
    return db_url


def verifier(url: str, *args: str) -> str:
    """``verifier ARGS`` as a real process on the store at `url`: its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "VERIFIER_DATABASE_URL": url},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_view_notes_an_accepted_missing_trail_and_nothing_else(url: str) -> None:
    config = make_config(url)
    accepted = sessions.show(config, ACCEPTED)
    assert accepted.delivery_status == "delivered"
    assert accepted.trail_note is not None and accepted.trail_note.startswith(NOTE)
    refused = sessions.show(config, REFUSED)
    assert refused.delivery_status == "inconclusive" and refused.trail_note is None
    assert refused.first_finding is not None and refused.first_finding.code == "audit.no_trail"
    assert sessions.show(config, RECORDED).trail_note is None


def test_show_says_it_in_text_and_json(url: str) -> None:
    text = verifier(url, "show", ACCEPTED)
    verdict = text.index("verdict: delivered")
    assert text.index("note: " + NOTE) > verdict
    assert "note:" not in verifier(url, "show", RECORDED)
    data = json.loads(verifier(url, "show", ACCEPTED, "--format", "json"))
    assert data["delivery_status"] == "delivered" and data["trail_note"].startswith(NOTE)
    assert json.loads(verifier(url, "show", RECORDED, "--format", "json"))["trail_note"] is None


def test_list_says_it_on_the_sessions_line_in_text_and_json(url: str) -> None:
    lines = {line.split()[1]: line for line in verifier(url, "list").splitlines() if "│" in line}
    assert "delivered (no audit trail)" in lines[ACCEPTED], lines
    assert "no audit trail" not in lines[RECORDED] + lines[REFUSED]
    listed = json.loads(verifier(url, "list", "--format", "json"))["sessions"]
    notes = {line["session_id"]: line["trail_note"] for line in listed}
    assert notes[ACCEPTED].startswith(NOTE)
    assert notes[RECORDED] is None and notes[REFUSED] is None


def test_the_apis_session_and_list_carry_the_audit_checks_note(url: str) -> None:
    tokens = make_tokens(url)
    with TestClient(create_app(make_config(url))) as client:
        body = client.get(f"/v1/sessions/{ACCEPTED}", headers=bearer(tokens["read"])).json()
        recorded = client.get(f"/v1/sessions/{RECORDED}", headers=bearer(tokens["read"])).json()
        listed = client.get("/v1/sessions", headers=bearer(tokens["read"])).json()
    assert body["delivery_status"] == "delivered" and body["trail_note"].startswith(NOTE)
    audit = body["checks"]["audit"]
    assert audit["details"]["trail"] == "none" and audit["notes"][0].startswith(NOTE)
    assert recorded["checks"]["audit"]["notes"] == [] and recorded["trail_note"] is None
    notes = {item["session_id"]: item["trail_note"] for item in listed["sessions"]}
    assert notes[ACCEPTED].startswith(NOTE) and notes[SILENT].startswith(NOTE)
    assert notes[RECORDED] is None and notes[REFUSED] is None


def test_the_dashboards_session_page_and_lists_say_it(url: str) -> None:
    tokens = make_tokens(url)
    with TestClient(create_app(make_config(url)), follow_redirects=False) as client:
        login(client, tokens["read"])
        page = html.unescape(client.get(f"/sessions/{ACCEPTED}").text)
        plain = client.get(f"/sessions/{RECORDED}").text
        listed = client.get("/sessions").text
        overview = client.get("/").text
    assert 'id="trail-note"' in page and NOTE in page
    assert 'id="trail-note"' not in plain
    rows = {
        session_id: row
        for session_id, row in (
            (r.split('"', 1)[0], r) for r in table(listed, "sessions").split('data-session="')[1:]
        )
    }
    assert 'class="trail-note"' in rows[ACCEPTED] and "no audit trail" in rows[ACCEPTED]
    assert "trail-note" not in rows[RECORDED] + rows[REFUSED]
    assert 'class="trail-note"' in rows[SILENT]
    # The overview's silent failures: the one without a trail says so.
    silent = table(overview, "silent")
    assert f'data-session="{SILENT}"' in silent and 'class="trail-note"' in silent
