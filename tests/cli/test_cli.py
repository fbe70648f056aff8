"""The command line, run as a real subprocess: exit codes a script can trust."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml, fix_turns, fixed_session, to_bytes


def verifier(
    *args: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


@pytest.fixture
def setup(repo: GitRepo, tmp_path: Path) -> tuple[GitRepo, Path]:
    return repo, config_toml(tmp_path, repo)


def write(tmp_path: Path, report: dict[str, Any], name: str = "report.json") -> Path:
    path = tmp_path / name
    path.write_bytes(to_bytes(report))
    return path


def test_delivered_session_exits_0_and_prints_json(
    setup: tuple[GitRepo, Path], tmp_path: Path
) -> None:
    repo, cfg = setup
    report = write(tmp_path, fixed_session(repo).report())
    before = repo.snapshot()
    done = verifier("verify", str(report), "--config", str(cfg), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["delivery_status"] == "delivered"
    assert data["done"] is True and data["agent_status"] == "done"
    assert {c: data["checks"][c]["status"] for c in data["checks"]} == {
        "changes": "pass",
        "tests": "pass",
        "audit": "pass",
        "replay": "pass",
    }
    assert data["stored"].startswith("stored as run")
    assert repo.snapshot() == before


def test_undelivered_session_exits_1_with_the_finding_in_text(
    setup: tuple[GitRepo, Path], tmp_path: Path
) -> None:
    repo, cfg = setup
    report = fixed_session(repo, turns=fix_turns(replacement="    return b - a\n")).report()
    done = verifier("verify", str(write(tmp_path, report)), "--config", str(cfg))
    assert done.returncode == 1
    assert "not delivered" in done.stdout
    assert "tests.failed" in done.stdout
    assert "running tests" in done.stderr  # progress while tests run


def test_report_from_stdin(setup: tuple[GitRepo, Path]) -> None:
    repo, cfg = setup
    raw = to_bytes(fixed_session(repo).report())
    done = verifier("verify", "-", "--config", str(cfg), "--format", "json", stdin=raw)
    assert done.returncode == 0, done.stderr


def test_invalid_report_exits_2_naming_the_field_and_keeps_the_bytes(
    setup: tuple[GitRepo, Path], tmp_path: Path
) -> None:
    repo, cfg = setup
    report = fixed_session(repo).report()
    del report["repo"]["base_commit"]
    path = write(tmp_path, report)
    done = verifier("verify", str(path), "--config", str(cfg))
    assert done.returncode == 2
    assert "repo.base_commit" in done.stderr and "missing" in done.stderr
    db = tmp_path / "store.sqlite3"
    with sqlite3.connect(db) as conn:
        (kept,) = conn.execute("select report from rejected_reports").fetchone()
    assert kept == path.read_bytes()


def test_not_json_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(b"\x00not json")
    done = verifier("verify", str(path))
    assert done.returncode == 2
    assert "not JSON" in done.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert verifier("verify").returncode == 2
    assert verifier("verify", str(tmp_path / "absent.json")).returncode == 2
    done = verifier("verify", "-", "--test-timeout", "0", stdin=b"{}")
    assert done.returncode == 2


def test_a_repo_flag_naming_no_repository_is_a_usage_error_and_nothing_is_stored(
    repo: GitRepo, tmp_path: Path
) -> None:
    """A typo in --repo must not turn a delivered session inconclusive in the rates."""
    report = write(tmp_path, fixed_session(repo).report())
    (tmp_path / "plain").mkdir()
    for wrong, why in ((tmp_path / "gone", "does not exist"), (tmp_path / "plain", "not a git")):
        done = verifier("verify", str(report), "--repo", str(wrong), "--format", "json")
        assert done.returncode == 2, done.stderr
        assert "--repo" in done.stderr and why in done.stderr
        # Under --format json, stdout holds the error object and nothing else: no verdict.
        error = json.loads(done.stdout)
        assert set(error) == {"error"} and error["error"]["code"] == "config"
        assert "--repo" in error["error"]["problem"] and why in error["error"]["problem"]
    listed = json.loads(verifier("list", "--format", "json").stdout)
    assert listed["sessions"] == []


def test_unreachable_database_makes_a_delivered_verdict_inconclusive(
    setup: tuple[GitRepo, Path], tmp_path: Path
) -> None:
    repo, cfg = setup
    report = write(tmp_path, fixed_session(repo).report())
    env = {"VERIFIER_DATABASE_URL": "postgresql+psycopg://nobody:secret@127.0.0.1:1/none"}
    done = verifier("verify", str(report), "--config", str(cfg), "--format", "json", env=env)
    assert done.returncode == 3
    data = json.loads(done.stdout)
    assert data["stored"].startswith("not stored")
    assert "secret" not in done.stdout + done.stderr


def test_test_command_override_is_split_without_a_shell(
    setup: tuple[GitRepo, Path], tmp_path: Path
) -> None:
    repo, cfg = setup
    report = write(tmp_path, fixed_session(repo).report())
    done = verifier(
        "verify",
        str(report),
        "--config",
        str(cfg),
        "--format",
        "json",
        "--test-command",
        f"{sys.executable} -c 'import sys; sys.exit(0)' ; touch pwned",
    )
    data = json.loads(done.stdout)
    assert data["checks"]["tests"]["details"]["argv"][-3:] == [";", "touch", "pwned"]
    assert not (repo.path / "pwned").exists()


def test_ingest_show_list_and_reverify(setup: tuple[GitRepo, Path], tmp_path: Path) -> None:
    repo, cfg = setup
    report = fixed_session(repo).report()
    path = write(tmp_path, report)
    first = verifier("ingest", str(path), str(path), "--format", "json")
    assert first.returncode == 0, first.stderr
    assert [r["result"] for r in json.loads(first.stdout)] == ["stored", "already stored"]

    for _ in range(2):
        assert verifier("verify", str(path), "--config", str(cfg)).returncode == 0
    shown = json.loads(verifier("show", "s-1", "--format", "json").stdout)
    assert [r["delivery_status"] for r in shown["runs"]] == ["delivered", "delivered"]
    assert shown["report_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "s-1" in verifier("show", "s-1").stdout

    listed = json.loads(verifier("list", "--format", "json").stdout)
    assert listed["rates"]["total"] == 1 and listed["rates"]["delivered"] == 1
    assert "delivered rate 100%" in verifier("list").stdout


def test_same_session_id_with_other_bytes_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    report = fixed_session(repo).report()
    a = write(tmp_path, report, "a.json")
    report["final_text"] = "something else"
    b = write(tmp_path, report, "b.json")
    assert verifier("ingest", str(a)).returncode == 0
    done = verifier("ingest", str(b), "--format", "json")
    assert done.returncode == 2
    assert json.loads(done.stdout)[0]["result"] == "conflict"
    shown = json.loads(verifier("show", "s-1", "--format", "json").stdout)
    assert shown["report_sha256"] == hashlib.sha256(a.read_bytes()).hexdigest()


def test_show_unknown_session_exits_2() -> None:
    done = verifier("show", "nope")
    assert done.returncode == 2
    assert "not stored" in done.stderr


def test_list_on_an_empty_store() -> None:
    done = verifier("list")
    assert done.returncode == 0
    assert "0 sessions" in done.stdout and "n/a" in done.stdout


def test_db_upgrade_creates_the_schema(tmp_path: Path) -> None:
    db = tmp_path / "fresh" / "v.sqlite3"
    done = verifier("db", "upgrade", env={"VERIFIER_DATABASE_URL": f"sqlite:///{db}"})
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    assert {"sessions", "verification_runs", "findings", "claimed_changes"} <= tables


def test_verify_refuses_a_stored_session_id_with_other_bytes_and_records_nothing(
    setup: tuple[GitRepo, Path], tmp_path: Path
) -> None:
    repo, cfg = setup
    report = fixed_session(repo).report()
    first = write(tmp_path, report, "first.json")
    assert verifier("ingest", str(first)).returncode == 0
    report["final_text"] = "rewritten afterwards"
    second = write(tmp_path, report, "second.json")
    done = verifier("verify", str(second), "--config", str(cfg))
    assert done.returncode == 2
    assert "already stored with different bytes" in done.stderr
    shown = json.loads(verifier("show", report["session_id"], "--format", "json").stdout)
    assert shown["runs"] == [] and shown["delivery_status"] == "pending"
    assert shown["report_sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()


def test_a_crash_exits_4_not_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 1 means "not delivered": a bug must never be read as a verdict."""
    from verifier import cli
    from verifier.config import Config

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(Config, "load", broken)
    assert cli.run(["list"]) == 4


@pytest.mark.postgres
def test_verify_into_postgresql_after_db_upgrade(
    setup: tuple[GitRepo, Path], tmp_path: Path
) -> None:
    from tests.support.pg import NO_POSTGRES, POSTGRES_URL, postgres_database

    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    repo, cfg = setup
    report = write(tmp_path, fixed_session(repo).report())
    with postgres_database(POSTGRES_URL) as url:
        env = {"VERIFIER_DATABASE_URL": url}
        refused = verifier("verify", str(report), "--config", str(cfg), env=env)
        assert refused.returncode == 2  # a store that is not migrated is a configuration error
        assert "run `verifier db upgrade`" in refused.stderr
        assert refused.stdout == ""  # no verdict printed, nothing recorded
        assert verifier("db", "upgrade", env=env).returncode == 0
        done = verifier("verify", str(report), "--config", str(cfg), "--format", "json", env=env)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["stored"].startswith("stored as run")
        listed = json.loads(verifier("list", "--format", "json", env=env).stdout)
        assert listed["rates"]["delivered"] == 1
