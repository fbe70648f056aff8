"""`verifier gate` blocks a merge with an undelivered session and lets it through once the
session is delivered: in every format, reading the local store or a real server."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.api import make_config, make_tokens, serve
from tests.support.gate import Live, Project, Ran, gate, make_project, sarif_schema_errors
from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    migrated_postgres_database,
)
from verifier.service.api import create_app

FORMATS = ("text", "json", "junit", "github", "sarif")


def _source_args(source: str, live: Live | None, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    if source == "store":
        return []
    assert live is not None
    monkeypatch.setenv("VERIFIER_TOKEN", live.tokens["read"])
    return ["--server", live.url]


def assert_blocked(fmt: str, ran: Ran, summary: Path, session_id: str) -> None:
    assert ran.code == 1, ran.err
    if fmt == "text":
        assert "not delivered" in ran.out
        assert "change.missing calc.py: calc.py is not at head" in ran.out
        assert "gate: blocked (exit 1): 1 of 1 session not delivered" in ran.out
    elif fmt == "json":
        data = ran.json()
        assert (data["outcome"], data["exit_code"]) == ("blocked", 1)
        [session] = data["sessions"]
        assert (session["session_id"], session["status"], session["blocks"]) == (
            session_id,
            "not_delivered",
            True,
        )
        assert [f["code"] for f in session["findings"]] == ["change.missing"]
    elif fmt == "junit":
        root = ET.fromstring(ran.out)
        [suite] = root.findall("testsuite")
        assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "1", "0")
        [case] = suite.findall("testcase")
        assert case.get("name") == session_id
        failure = case.find("failure")
        assert failure is not None and failure.get("type") == "not_delivered"
        assert "change.missing calc.py" in (failure.get("message") or "")
    elif fmt == "github":
        commands = [line for line in ran.out.splitlines() if line.startswith("::")]
        token = commands[-1].strip(":")
        assert commands == [
            f"::error file=calc.py,title=change.missing ({session_id}%2C not delivered)"
            "::calc.py is not at head",
            f"::stop-commands::{token}",
            f"::{token}::",
        ]
        text = summary.read_text(encoding="utf-8")
        assert "verifier gate: blocked (exit 1)" in text
        assert f"| ❌ | <code>{session_id}</code> |" in text
    else:
        document = json.loads(ran.out)
        assert sarif_schema_errors(document) == []
        [result] = document["runs"][0]["results"]
        assert (result["ruleId"], result["level"]) == ("change.missing", "error")
        location = result["locations"][0]["physicalLocation"]["artifactLocation"]
        assert location["uri"] == "calc.py"
        assert document["runs"][0]["invocations"][0]["exitCode"] == 1


def assert_passed(fmt: str, ran: Ran, summary: Path, session_id: str) -> None:
    assert ran.code == 0, ran.err + ran.out
    if fmt == "text":
        assert "gate: passed (exit 0): 1 of 1 session delivered" in ran.out
        assert "not delivered" not in ran.out
    elif fmt == "json":
        data = ran.json()
        assert (data["outcome"], data["exit_code"]) == ("passed", 0)
        assert [s["status"] for s in data["sessions"]] == ["delivered"]
    elif fmt == "junit":
        [suite] = ET.fromstring(ran.out).findall("testsuite")
        assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")
        [case] = suite.findall("testcase")
        assert case.get("name") == session_id
        assert case.find("failure") is None and case.find("error") is None
    elif fmt == "github":
        commands = [line for line in ran.out.splitlines() if line.startswith("::")]
        assert [c.split("::")[1] for c in commands] == ["stop-commands", commands[-1].strip(":")]
        text = summary.read_text(encoding="utf-8")
        # Appended after the blocked run's summary: both answers are there, in order.
        assert text.index("blocked (exit 1)") < text.index("verifier gate: passed (exit 0)")
        assert f"| ✅ | <code>{session_id}</code> |" in text
    else:
        document = json.loads(ran.out)
        assert sarif_schema_errors(document) == []
        assert document["runs"][0]["results"] == []
        assert document["runs"][0]["invocations"][0]["exitCode"] == 0


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("source", ["store", "server"])
def test_an_undelivered_session_blocks_and_its_delivery_lets_the_merge_through(
    fmt: str,
    source: str,
    project: Project,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    live = request.getfixturevalue("live") if source == "server" else None
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project.ingest("s-1")
    project.record("s-1", "not_delivered")
    args = [
        "--commit",
        project.head[:9],
        "--repo",
        str(project.repo.path),
        "--format",
        fmt,
        *_source_args(source, live, monkeypatch),
    ]
    before = project.repo.snapshot()

    assert_blocked(fmt, gate(capsys, *args), summary, "s-1")
    project.record("s-1", "delivered")
    assert_passed(fmt, gate(capsys, *args), summary, "s-1")
    assert project.repo.snapshot() == before  # git only read it
    if fmt != "github":
        assert not summary.exists()


@pytest.mark.postgres
def test_on_postgresql_the_gate_blocks_then_lets_through_from_the_store_and_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url:
        monkeypatch.setenv("VERIFIER_DATABASE_URL", url)
        project = make_project(tmp_path, url)
        tokens = make_tokens(url)
        with serve(create_app(make_config(url))) as server:
            live = Live(server, tokens)
            for n, fmt in enumerate(FORMATS):
                session_id = f"pg-{fmt}"
                head = project.repo.commit({f"{fmt}.txt": fmt}, msg=fmt)
                project.ingest(session_id, head=head, n=n)
                project.record(session_id, "not_delivered")
                for source in ("store", "server"):
                    summary = tmp_path / f"{fmt}-{source}.md"
                    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
                    args = ["--commit", head, "--format", fmt]
                    args += _source_args(source, live, monkeypatch)
                    assert_blocked(fmt, gate(capsys, *args), summary, session_id)
                project.record(session_id, "delivered")
                for source in ("store", "server"):
                    summary = tmp_path / f"{fmt}-{source}.md"
                    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
                    args = ["--commit", head, "--format", fmt]
                    args += _source_args(source, live, monkeypatch)
                    assert_passed(fmt, gate(capsys, *args), summary, session_id)


def test_a_step_summary_that_cannot_be_written_is_said_and_the_verdict_stands(
    project: Project,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project.ingest("s1")
    project.record("s1", "not_delivered")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a folder: cannot be appended to
    ran = gate(capsys, "--session", "s1", "--format", "github")
    assert ran.code == 1
    assert f"verifier: cannot append to $GITHUB_STEP_SUMMARY '{tmp_path}'" in ran.err
    assert ran.out.startswith("::error file=calc.py,")
