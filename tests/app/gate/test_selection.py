"""Which sessions `verifier gate` selects, from a store or a server, and the usage errors
and server problems it refuses with exit 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gate import Live, Project, gate
from verifier.app import gate as gate_module
from verifier.store.overrides import record_override

SOURCES = ["store", "server"]


def _args(
    source: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    if source == "store":
        return ["--format", "json"]
    live: Live = request.getfixturevalue("live")
    monkeypatch.setenv("VERIFIER_TOKEN", live.tokens["read"])
    return ["--format", "json", "--server", live.url]


def _ids(data: dict[str, object]) -> list[str]:
    return [s["session_id"] for s in data["sessions"]]  # type: ignore[attr-defined,index]


@pytest.mark.parametrize("source", SOURCES)
def test_a_rev_range_selects_the_sessions_whose_head_is_in_it(
    source: str,
    project: Project,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    later = project.repo.commit({"more.py": "x = 1\n"}, msg="agent: more")
    project.ingest("at-base", head=project.base)
    project.ingest("at-head", head=project.head)
    project.ingest("at-later", head=later)
    project.ingest("elsewhere", head="0123" * 10)
    for session_id in project.sessions:
        project.record(session_id, "delivered")
    project.record("at-later", "not_delivered")

    ran = gate(
        capsys,
        "--rev-range",
        f"{project.base[:7]}..main",
        "--repo",
        str(project.repo.path),
        *_args(source, request, monkeypatch),
    )
    data = ran.json()
    assert sorted(_ids(data)) == ["at-head", "at-later"]
    assert (ran.code, data["selection"]["range_commits"]) == (1, 2)

    ran = gate(
        capsys,
        "--rev-range",
        f"{project.base}..{project.head}",
        "--repo",
        str(project.repo.path),
        *_args(source, request, monkeypatch),
    )
    assert (ran.code, _ids(ran.json())) == (0, ["at-head"])


@pytest.mark.parametrize("source", SOURCES)
def test_branch_session_and_commit_selections_add_up(
    source: str,
    project: Project,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project.ingest("fix-1", branch="agent/fix")
    project.ingest("fix-2", branch="agent/fix", head=project.base)
    project.ingest("other", branch="agent/other", head="4567" * 10)
    for session_id in project.sessions:
        project.record(session_id, "delivered")
    args = _args(source, request, monkeypatch)

    ran = gate(capsys, "--branch", "agent/fix", *args)
    assert (ran.code, sorted(_ids(ran.json()))) == (0, ["fix-1", "fix-2"])
    ran = gate(capsys, "--session", "other", "--commit", "4567" * 10, *args)
    assert (ran.code, _ids(ran.json())) == (0, ["other"])
    ran = gate(capsys, "--branch", "agent/other", "--session", "fix-1", *args)
    assert sorted(_ids(ran.json())) == ["fix-1", "other"]


@pytest.mark.parametrize("source", SOURCES)
def test_a_named_session_nobody_stored_blocks(
    source: str,
    project: Project,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project.ingest("known")
    project.record("known", "delivered")
    ran = gate(
        capsys, "--session", "known", "--session", "ghost", *_args(source, request, monkeypatch)
    )
    data = ran.json()
    assert ran.code == 1
    assert [(s["session_id"], s["status"]) for s in data["sessions"]] == [
        ("known", "delivered"),
        ("ghost", "missing"),
    ]


@pytest.mark.parametrize("source", SOURCES)
def test_every_page_is_read(
    source: str,
    project: Project,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(gate_module, "PAGE", 1)
    monkeypatch.setattr(gate_module, "COMMITS_PER_QUERY", 1)
    monkeypatch.setattr(gate_module, "COMMITS_PER_REQUEST", 1)
    later = project.repo.commit({"more.py": "x = 1\n"}, msg="agent: more")
    for n in range(3):
        project.ingest(f"head-{n}")
        project.record(f"head-{n}", "delivered")
    project.ingest("later", head=later)
    project.record("later", "not_delivered")
    ran = gate(
        capsys,
        "--rev-range",
        f"{project.base}..{later}",
        "--repo",
        str(project.repo.path),
        *_args(source, request, monkeypatch),
    )
    assert sorted(_ids(ran.json())) == ["head-0", "head-1", "head-2", "later"]
    assert ran.code == 1


def test_an_override_in_the_store_decides_and_says_so(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.ingest("s1")
    project.record("s1", "not_delivered")
    with project.store() as store:
        record_override(store, "s1", status="delivered", reason="moved by hand", author="alice")
    ran = gate(capsys, "--session", "s1", "--format", "json")
    [session] = ran.json()["sessions"]
    assert ran.code == 0
    assert (session["status"], session["computed_status"], session["decided_by"]) == (
        "delivered",
        "not_delivered",
        "override",
    )
    assert session["override"] == {
        "status": "delivered",
        "author": "alice",
        "reason": "moved by hand",
    }
    assert session["findings"][0]["code"] == "change.missing"

    with project.store() as store:
        record_override(store, "s1", status="cleared", reason="mistaken", author="bob")
    assert gate(capsys, "--session", "s1").code == 1


def test_inconclusive_blocks_with_exit_3_unless_passed_and_not_delivered_wins(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.ingest("unsure")
    project.record("unsure", "inconclusive")
    project.ingest("pending")
    args = ["--commit", project.head]
    ran = gate(capsys, *args)
    assert ran.code == 3
    assert "gate: undecided (exit 3): 2 of 2 sessions inconclusive or still pending" in ran.out
    assert gate(capsys, *args, "--inconclusive", "pass").code == 0
    project.ingest("broken")
    project.record("broken", "not_delivered")
    assert gate(capsys, *args).code == 1


def test_no_store_is_exit_3_allowed_empty_or_not_and_no_store_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tmp_path / "never" / "store.sqlite3"
    monkeypatch.setenv("VERIFIER_DATABASE_URL", f"sqlite:///{absent}")
    for allow in ([], ["--allow-empty"]):
        ran = gate(capsys, "--commit", "ab" * 20, *allow)
        assert ran.code == 3, ran.out
        said = " ".join(ran.out.split())
        assert "gate: undecided (exit 3): the verdicts cannot be read: no store at" in said
    assert not absent.parent.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "select sessions: give --session, --commit, --branch or --rev-range"),
        (["--rev-range", "main"], "--rev-range: got 'main', expected BASE..HEAD"),
        (["--rev-range", "main...HEAD"], "--rev-range: got 'main...HEAD', expected BASE..HEAD"),
        (["--rev-range", "nope..main"], "--rev-range: 'nope' does not name a commit in"),
        (["--rev-range", f"{'ab' * 20}..main"], f"--rev-range: '{'ab' * 20}' is not a commit in"),
        (["--commit", "nope"], "--commit: 'nope' does not name a commit in"),
        (["--commit", "--upload-pack=x"], "--commit: got '--upload-pack=x', expected a commit"),
        (["--session", ""], "--session: got '', expected a non-empty name"),
        (["--commit", "HEAD", "--format", "xml"], "Invalid value for '--format'"),
        (["--commit", "HEAD", "--inconclusive", "maybe"], "Invalid value for '--inconclusive'"),
        (["--commit", "HEAD", "--wait", "-1"], "Invalid value for '--wait'"),
    ],
)
def test_usage_errors_exit_2_naming_the_option(
    args: list[str], message: str, project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = gate(capsys, *args, "--repo", str(project.repo.path))
    assert ran.code == 2
    assert message in ran.err
    assert ran.out == ""


def test_an_abbreviated_sha_needs_a_repository_a_full_one_does_not(
    tmp_path: Path, project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.ingest("s1")
    project.record("s1", "delivered")
    plain = tmp_path / "plain"
    plain.mkdir()
    ran = gate(capsys, "--commit", project.head[:8], "--repo", str(plain))
    assert ran.code == 2
    assert f"--commit: '{plain}' is not a git repository" in ran.err
    assert gate(capsys, "--commit", project.head.upper(), "--repo", str(plain)).code == 0


def test_server_problems_exit_3_naming_the_problem_and_a_missing_token_or_url_2(
    project: Project,
    live: Live,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project.ingest("s1")
    project.record("s1", "delivered")
    args = ["--session", "s1"]
    monkeypatch.delenv("VERIFIER_TOKEN", raising=False)
    ran = gate(capsys, *args, "--server", live.url)
    assert (ran.code, ran.err.strip()) == (
        2,
        "verifier: --server: $VERIFIER_TOKEN is not set: put the read token there",
    )

    monkeypatch.setenv("VERIFIER_TOKEN", "vf_not-a-token")
    ran = gate(capsys, *args, "--server", live.url)
    assert ran.code == 3
    said = " ".join(ran.out.split())
    assert f"VERIFIER_TOKEN: the server {live.url} refused this token (401: " in said

    monkeypatch.setenv("VERIFIER_TOKEN", live.tokens["ingest"])
    ran = gate(capsys, *args, "--server", live.url)
    assert ran.code == 3
    assert "lacks the read scope for this token (403: " in " ".join(ran.out.split())

    monkeypatch.setenv("VERIFIER_TOKEN", live.tokens["read"])
    assert gate(capsys, *args, "--server", live.url).code == 0

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    ran = gate(capsys, *args, "--server", closed)
    assert ran.code == 3
    assert f"--server: {closed} cannot be reached (ConnectError" in " ".join(ran.out.split())

    ran = gate(capsys, *args, "--server", "127.0.0.1:8080")
    assert (ran.code, ran.err.strip()) == (
        2,
        "verifier: --server: got '127.0.0.1:8080', expected an http:// or https:// URL",
    )

    # A server that is not the verifier's API: a 404 on the listing, named.
    ran = gate(capsys, "--commit", project.head, "--server", live.url + "/elsewhere")
    assert ran.code == 3
    assert "answered 404 to GET /v1/sessions" in " ".join(ran.out.split())


def _verifier() -> str:
    return str(Path(sys.executable).with_name("verifier"))


@pytest.mark.parametrize("source", SOURCES)
def test_wait_reads_again_until_the_pending_session_is_verified(
    source: str, project: Project, request: pytest.FixtureRequest
) -> None:
    project.ingest("s1")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [_verifier(), "gate", "--session", "s1", "--wait", "300", "--format", "json"]
    if source == "server":
        live: Live = request.getfixturevalue("live")
        env["VERIFIER_TOKEN"] = live.tokens["read"]
        command += ["--server", live.url]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=project.repo.path,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # blocks until the gate has read the pending session
        assert "waiting for 1 of 1 session still pending (s1)" in first
        project.record("s1", "delivered")
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert '"outcome": "passed"' in out


def test_wait_gives_up_at_its_deadline_and_the_pending_session_exits_3(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.ingest("s1")
    ran = gate(capsys, "--session", "s1", "--wait", "0.3")
    assert ran.code == 3
    assert "waiting for 1 of 1 session still pending (s1)" in ran.err
    assert "still pending" in ran.out and "waited 0s" in ran.out
