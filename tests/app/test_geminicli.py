"""`verifier.app.geminicli`: a real gemini-cli session's transcript made into a report without
a trail, verified: inconclusive by default (`audit.no_trail`), delivered when the repository
accepts trail-less sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import geminicli
from tests.support.gitrepo import GitRepo, sha256
from tests.support.sessions import CALC, config_toml
from verifier.app import geminicli as app
from verifier.app import pipeline
from verifier.config import Config
from verifier.errors import ConfigError

FIXED = CALC.replace(
    "def subtract(a, b):\n    return a + b", "def subtract(a, b):\n    return a - b"
)
FIX = {
    "file_path": "calc.py",
    "old_string": "def subtract(a, b):\n    return a + b",
    "new_string": "def subtract(a, b):\n    return a - b",
    "instruction": "subtract must subtract",
}


def honest(repo: GitRepo, home: Path, model: str = geminicli.LEGACY_MODEL) -> Path:
    ran = geminicli.session(
        repo.path,
        home,
        [
            geminicli.turn({"read_file": {"file_path": "calc.py"}}),
            geminicli.turn({"replace": FIX}),
            geminicli.turn({"run_shell_command": {"command": "python3 -m pytest -q"}}),
            geminicli.turn("Fixed subtract()."),
        ],
        prompt="Fix subtract.",
        model=model,
    )
    assert ran.returncode == 0 and ran.transcript is not None, ran.stderr[-2000:]
    return ran.transcript


def verdict(config: Config, report: Path) -> dict[str, Any]:
    outcome = pipeline.verify_file(config, str(report), store=False)
    return outcome.verification.to_dict()


def codes(result: dict[str, Any]) -> list[str]:
    return [f["code"] for check in result["checks"].values() for f in check["findings"]]


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        (geminicli.LEGACY_MODEL, "gemini-cli-0.61-legacy"),
        (geminicli.GEMINI_3_MODEL, "gemini-cli-0.61-gemini-3"),
    ],
)
def test_an_honest_transcript_is_inconclusive_without_a_trail_and_delivered_when_accepted(
    repo: GitRepo, tmp_path: Path, model: str, profile: str
) -> None:
    transcript = honest(repo, tmp_path / "home", model)
    config = Config.load(config_toml(tmp_path, repo), environ={})
    imported = app.import_transcript(config, transcript, repo.path)
    doc = imported.report.doc
    assert (doc.agent.name, doc.agent.model, doc.agent.tool_profile) == (
        "gemini-cli",
        model,
        profile,
    )
    assert doc.repo.name == "calc" and doc.repo.head_commit is None  # worktree mode
    assert doc.status == "done" and doc.task == "Fix subtract."
    assert doc.audit.trail == "none" and doc.audit.entries == []
    [claim] = doc.changes
    assert (claim.path, claim.action) == ("calc.py", "modify")
    assert (claim.sha256_before, claim.sha256_after) == (
        sha256(CALC.encode()),
        sha256(FIXED.encode()),
    )
    assert [c.name for c in imported.report.trajectory.calls] == [
        "read_file",
        "replace",
        "run_shell_command",
    ]

    out = tmp_path / "report.json"
    app.save(imported, out)
    strict = verdict(config, out)
    assert strict["delivery_status"] == "inconclusive"
    assert strict["checks"]["audit"]["status"] == "error"
    assert codes(strict) == ["audit.no_trail"]
    assert {n: c["status"] for n, c in strict["checks"].items() if n != "audit"} == {
        "changes": "pass",
        "tests": "pass",
        "replay": "pass",
    }

    lax = Config.load(config_toml(tmp_path, repo, trail="optional"), environ={})
    accepted = verdict(lax, out)
    assert accepted["delivery_status"] == "delivered", codes(accepted)
    assert any("no audit trail" in n for n in accepted["checks"]["audit"]["notes"])


def test_an_edit_the_transcript_does_not_show_is_undeclared(repo: GitRepo, tmp_path: Path) -> None:
    transcript = honest(repo, tmp_path / "home")
    repo.write({"README.md": "changed behind the transcript's back\n"})
    config = Config.load(config_toml(tmp_path, repo, trail="optional"), environ={})
    out = tmp_path / "report.json"
    app.save(app.import_transcript(config, transcript, repo.path), out)
    result = verdict(config, out)
    assert result["delivery_status"] == "not_delivered"
    assert "change.undeclared" in codes(result)


def test_a_session_that_committed_is_imported_in_commit_mode(repo: GitRepo, tmp_path: Path) -> None:
    base = repo.head()
    transcript = honest(repo, tmp_path / "home")
    head = repo.commit(msg="the session's commit")
    config = Config.load(config_toml(tmp_path, repo, trail="optional"), environ={})
    imported = app.import_transcript(config, transcript, repo.path, base=base[:12])
    assert (imported.report.doc.repo.base_commit, imported.report.doc.repo.head_commit) == (
        base,
        head,
    )
    out = tmp_path / "report.json"
    app.save(imported, out)
    assert verdict(config, out)["delivery_status"] == "delivered"


def test_a_transcript_that_stops_mid_work_is_not_done(repo: GitRepo, tmp_path: Path) -> None:
    ran = geminicli.session(repo.path, tmp_path / "home", [geminicli.turn({"replace": FIX})])
    assert ran.returncode != 0 and ran.transcript is not None  # out of scripted turns
    config = Config.load(config_toml(tmp_path, repo), environ={})
    doc = app.import_transcript(config, ran.transcript, repo.path).report.doc
    assert doc.status == "error" and len(doc.changes) == 1


def test_a_base_that_names_no_commit_and_a_folder_that_is_no_repository_are_refused(
    repo: GitRepo, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"sessionId": "s", "projectHash": "p"}) + "\n")
    config = Config.load(config_toml(tmp_path, repo), environ={})
    with pytest.raises(ConfigError, match="--base: 'nope' names no commit"):
        app.import_transcript(config, transcript, repo.path, base="nope")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="--repo"):
        app.import_transcript(config, transcript, tmp_path / "plain")


def test_the_profile_follows_gemini_clis_model_family() -> None:
    assert app.tool_profile("gemini-3-pro-preview") == "gemini-cli-0.61-gemini-3"
    assert app.tool_profile("gemini-3.1-flash") == "gemini-cli-0.61-gemini-3"
    assert app.tool_profile("gemini-2.5-pro") == "gemini-cli-0.61-legacy"
    assert app.tool_profile("gemini-30") == "gemini-cli-0.61-legacy"
    assert app.tool_profile(None) == "gemini-cli-0.61-legacy"
