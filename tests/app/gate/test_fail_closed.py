"""The gate fails closed: a setup that is wrong is exit 3 with the problem said, in every
format, ``--allow-empty`` or not; ``--allow-empty`` passes only an empty selection from a
source that holds sessions of this repository; every selector is repeatable."""

from __future__ import annotations

import json
import socket
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.api import make_config
from tests.support.gate import Live, Project, Ran, gate, sarif_schema_errors
from verifier.app import gate as app_gate

FORMATS = ("text", "json", "junit", "github", "sarif")


def flat(text: str) -> str:
    """The text with its wrapping undone (rich folds long lines at the console's width)."""
    return " ".join(text.split())


def assert_undecided(fmt: str, ran: Ran, problem: str) -> None:
    """Exit 3, and `problem` said where a reader of `fmt` looks."""
    assert ran.code == 3, ran.out + ran.err
    if fmt == "text":
        said = flat(ran.out)
        assert "gate: undecided (exit 3): the verdicts cannot be read: " in said
        assert problem in said
        assert "next:" in said
    elif fmt == "json":
        data = ran.json()
        assert (data["outcome"], data["exit_code"]) == ("undecided", 3)
        assert problem in data["unavailable"] and data["next"]
    elif fmt == "junit":
        [suite] = ET.fromstring(ran.out).findall("testsuite")
        assert (suite.get("tests"), suite.get("errors")) == ("1", "1")
        error = suite.find("testcase/error")
        assert error is not None and error.get("type") == "unavailable"
        assert problem in flat(error.get("message") or "")
    elif fmt == "github":
        [error] = [line for line in ran.out.splitlines() if line.startswith("::error")]
        assert error.startswith("::error title=verdicts cannot be read::")
        assert problem in error
    else:
        document = json.loads(ran.out)
        assert sarif_schema_errors(document) == []
        [run] = document["runs"]
        assert run["invocations"][0]["executionSuccessful"] is False
        assert run["invocations"][0]["exitCode"] == 3
        [result] = run["results"]
        assert result["ruleId"] == "gate.unavailable" and problem in result["message"]["text"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("allow", [[], ["--allow-empty"]], ids=["strict", "allow-empty"])
def test_a_store_that_does_not_exist_is_undecided(
    fmt: str,
    allow: list[str],
    tmp_path: Path,
    project: Project,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    absent = tmp_path / "elsewhere" / "store.sqlite3"
    monkeypatch.setenv("VERIFIER_DATABASE_URL", f"sqlite:///{absent}")
    ran = gate(capsys, "--commit", project.head, "--repo", str(project.repo.path), *allow,
               "--format", fmt)  # fmt: skip
    assert_undecided(fmt, ran, f"no store at {str(absent)!r}")
    assert not absent.parent.exists()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"not a database, whatever its name says" * 40, "file is not a database"),
     (b"", "is at no revision (never migrated)")],
    ids=["garbage", "never-migrated"],
)  # fmt: skip
def test_a_store_that_cannot_be_read_is_undecided(
    fmt: str,
    content: bytes,
    problem: str,
    tmp_path: Path,
    project: Project,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = tmp_path / "broken.sqlite3"
    broken.write_bytes(content)
    monkeypatch.setenv("VERIFIER_DATABASE_URL", f"sqlite:///{broken}")
    ran = gate(capsys, "--commit", project.head, "--repo", str(project.repo.path),
               "--allow-empty", "--format", fmt)  # fmt: skip
    assert_undecided(fmt, ran, problem)
    assert broken.read_bytes() == content  # read-only: nothing written


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("allow", [[], ["--allow-empty"]], ids=["strict", "allow-empty"])
def test_a_store_with_no_session_of_this_repository_is_undecided(
    fmt: str, allow: list[str], project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    # The store holds sessions, of another repository: it is not this one's store.
    project.ingest("elsewhere", head="cd" * 20)
    project.record("elsewhere", "delivered")
    ran = gate(capsys, "--rev-range", f"{project.base}..{project.head}",
               "--repo", str(project.repo.path), *allow, "--format", fmt)  # fmt: skip
    assert_undecided(fmt, ran, "holds no session of the repository at")


def test_an_empty_selection_from_a_store_that_knows_the_repository_is_1_or_allowed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.ingest("s1")
    project.record("s1", "delivered")
    person = project.repo.commit({"NOTES.md": "by hand\n"}, msg="person: notes")
    args = ["--rev-range", f"{project.head}..{person}", "--repo", str(project.repo.path)]
    strict = gate(capsys, *args)
    assert strict.code == 1 and "gate: blocked (exit 1): no session selected" in strict.out
    assert "next: no session claims this change" in flat(strict.out)
    allowed = gate(capsys, *args, "--allow-empty", "--format", "json")
    assert (allowed.code, allowed.json()["reason"]) == (0, "no session selected (--allow-empty)")


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


class NotTheApi(BaseHTTPRequestHandler):
    """A web server that is no verifier service: 200 with a page, or JSON of another shape."""

    def do_GET(self) -> None:
        body = b'{"items": []}' if "head_commit" in self.path else b"<html>hello</html>"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def not_the_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotTheApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("server", ["closed", "not-the-api", "wrong-token"])
def test_a_server_that_does_not_answer_or_answers_wrongly_is_undecided(
    fmt: str,
    server: str,
    project: Project,
    live: Live,
    not_the_api: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project.ingest("s1")
    project.record("s1", "delivered")
    url, problem = {
        "closed": (closed := _closed_port(), f"--server: {closed} cannot be reached"),
        "not-the-api": (not_the_api, "no list of sessions: is it a verifier service?"),
        "wrong-token": (live.url, "refused this token (401"),
    }[server]
    monkeypatch.setenv("VERIFIER_TOKEN", "vf_not-a-token" if server == "wrong-token" else "t")
    ran = gate(capsys, "--commit", project.base, "--repo", str(project.repo.path),
               "--allow-empty", "--server", url, "--format", fmt)  # fmt: skip
    assert_undecided(fmt, ran, problem)


def test_a_server_with_no_session_of_this_repository_is_undecided(
    project: Project,
    live: Live,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project.ingest("elsewhere", head="cd" * 20)
    monkeypatch.setenv("VERIFIER_TOKEN", live.tokens["read"])
    args = ["--commit", project.head, "--repo", str(project.repo.path), "--server", live.url]
    ran = gate(capsys, *args, "--allow-empty", "--format", "json")
    assert_undecided("json", ran, f"the server {live.url} holds no session of the repository")
    # Once the repository has a session there, a commit no session claims is allowed.
    project.ingest("s1")
    project.record("s1", "delivered")
    person = project.repo.commit({"NOTES.md": "by hand\n"}, msg="person: notes")
    ran = gate(capsys, "--commit", person, "--repo", str(project.repo.path), "--server", live.url,
               "--allow-empty")  # fmt: skip
    assert ran.code == 0, ran.out


def test_every_rev_range_given_is_judged(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two ranges: the first one's session is not delivered, the second one's is. The last
    # range used to win, and the merge passed.
    project.ingest("s1")
    project.record("s1", "not_delivered")
    second = project.repo.commit({"more.py": "x = 1\n"}, msg="agent: more")
    project.ingest("s2", head=second)
    project.record("s2", "delivered")
    first_range, second_range = f"{project.base}..{project.head}", f"{project.head}..{second}"
    ran = gate(capsys, "--rev-range", first_range, "--rev-range", second_range,
               "--repo", str(project.repo.path), "--format", "json")  # fmt: skip
    data = ran.json()
    assert ran.code == 1
    assert {s["session_id"]: s["status"] for s in data["sessions"]} == {
        "s1": "not_delivered",
        "s2": "delivered",
    }
    assert data["selection"]["rev_ranges"] == [first_range, second_range]
    assert data["selection"]["range_commits"] == 2
    # Either order, and a repeated range once.
    again = gate(capsys, "--rev-range", second_range, "--rev-range", first_range,
                 "--rev-range", second_range, "--repo", str(project.repo.path))  # fmt: skip
    assert again.code == 1
    assert f"--rev-range {second_range}, --rev-range {first_range} (2 commits)" in flat(again.out)


def test_wait_waits_for_a_report_not_posted_yet(project: Project) -> None:
    project.ingest("s0", head=project.base)  # the store knows this repository
    project.record("s0", "delivered")
    config = make_config(project.database_url)
    said: list[str] = []

    def post_later() -> None:
        time.sleep(1.5)
        project.ingest("s1")
        project.record("s1", "not_delivered")

    poster = threading.Thread(target=post_later)
    poster.start()
    try:
        decision = app_gate.judge(
            lambda: config,
            commits=(project.head,),
            repo=project.repo.path,
            allow_empty=True,
            wait_s=30,
            progress=said.append,
        )
    finally:
        poster.join()
    assert decision.exit_code == app_gate.BLOCKED, decision.reason
    assert [d.session.session_id for d in decision.sessions] == ["s1"]
    assert said and said[0].startswith("waiting for a session to be posted")
    assert decision.waited_s is not None and 1.0 < decision.waited_s < 30


def test_a_blocked_gate_says_what_to_do_next(
    project: Project,
    live: Live,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project.ingest("s1")
    project.record("s1", "not_delivered")
    ran = gate(capsys, "--session", "s1")
    assert ran.code == 1
    said = flat(ran.out)
    assert "next: verifier show s1: its findings and runs" in said
    assert (
        "verifier override s1 --status delivered --reason TEXT: when a person knows better; "
        "by a person who may write the verifier's store (recorded as cli:<user>)"
    ) in said
    assert ran.out.index("gate: blocked") < ran.out.index("next:")

    monkeypatch.setenv("VERIFIER_TOKEN", live.tokens["read"])
    served = gate(capsys, "--session", "s1", "--server", live.url, "--format", "json")
    steps = served.json()["next"]
    assert (
        steps[0] == f"{live.url}/sessions/s1: its findings and runs (the dashboard, a read token)"
    )
    assert f"POST {live.url}/v1/sessions/ID/override with an admin token" in steps[1]

    project.record("s1", "delivered")
    passed = gate(capsys, "--session", "s1", "--format", "json")
    assert (
        passed.code == 0
        and passed.json()["next"] == []
        and "next:" not in gate(capsys, "--session", "s1").out
    )
