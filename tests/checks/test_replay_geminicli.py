"""Replay of real gemini-cli sessions through its profiles' matching rules: honest tolerant
edits replay exactly and are noted, or fail under ``tolerant_edits = "fail"``; a corrected
write is its own finding; bytes that are not what gemini-cli wrote are a mismatch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support import geminicli
from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml
from verifier.app import geminicli as app
from verifier.app import pipeline
from verifier.config import Config

FUZZY_FIX = {
    "file_path": "calc.py",
    # A typo ("subtrakt"): no exact, trimmed or token match; the fuzzy step finds it.
    "old_string": "def subtrakt(a, b):\n    return a + b",
    "new_string": "def subtract(a, b):\n    return a - b",
    "instruction": "subtract must subtract",
}
CRLF_EDIT = {
    "file_path": "notes.txt",
    "old_string": "second",
    "new_string": "2nd",
    "instruction": "shorter",
}


def _verify(
    repo: GitRepo, tmp: Path, turns: list[dict[str, Any]], model: str, **policy: str
) -> dict[str, Any]:
    ran = geminicli.session(repo.path, tmp / "home", turns, model=model)
    assert ran.returncode == 0 and ran.transcript is not None, ran.stderr[-2000:]
    config = Config.load(config_toml(tmp, repo, trail="optional", **policy), environ={})
    out = tmp / "report.json"
    app.save(app.import_transcript(config, ran.transcript, repo.path), out)
    return pipeline.verify_file(config, str(out), store=False).verification.to_dict()


def _codes(result: dict[str, Any], check: str) -> list[str]:
    return [f["code"] for f in result["checks"][check]["findings"]]


def test_a_fuzzy_edit_and_a_crlf_file_replay_exactly_and_the_tolerance_is_noted(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.commit({"notes.txt": b"first\r\nsecond\r\n"})
    turns = [
        geminicli.turn({"replace": FUZZY_FIX}),
        geminicli.turn({"replace": CRLF_EDIT}),
        geminicli.turn("Fixed."),
    ]
    result = _verify(repo, tmp_path, turns, geminicli.LEGACY_MODEL)
    assert (repo.path / "notes.txt").read_bytes() == b"first\r\n2nd\r\n"
    assert result["delivery_status"] == "delivered", result["checks"]
    replay = result["checks"]["replay"]
    assert replay["details"]["replayed"] == 2
    [tolerated] = replay["details"]["tolerated"]
    assert (tolerated["code"], tolerated["path"], tolerated["found"]) == (
        "replay.tolerant_match",
        "calc.py",
        "fuzzy",
    )
    assert any(
        n.startswith("replay.tolerant_match (tolerant_edits = 'note')") for n in replay["notes"]
    )


def test_under_tolerant_edits_fail_a_fuzzy_edit_is_not_delivered(
    repo: GitRepo, tmp_path: Path
) -> None:
    turns = [geminicli.turn({"replace": FUZZY_FIX}), geminicli.turn("Fixed.")]
    result = _verify(repo, tmp_path, turns, geminicli.GEMINI_3_MODEL, tolerant_edits="fail")
    assert result["delivery_status"] == "not_delivered"
    assert _codes(result, "replay") == ["replay.tolerant_match"]
    assert result["checks"]["tests"]["status"] == "pass"  # the work itself is right


def test_a_write_gemini_cli_unescaped_is_a_corrected_edit(repo: GitRepo, tmp_path: Path) -> None:
    fixed = (repo.path / "calc.py").read_text().replace("return a + b\n", "return a - b\n")
    fixed = fixed.replace("def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b")
    # The model sent its newlines escaped; gemini-1.5 models' writes are unescaped.
    escaped = fixed.replace("\n", "\\n")
    turns = [
        geminicli.turn({"write_file": {"file_path": "calc.py", "content": escaped}}),
        geminicli.turn("Rewrote calc.py."),
    ]
    noted = _verify(repo, tmp_path / "note", turns, "gemini-1.5-pro")
    assert (repo.path / "calc.py").read_text() == fixed
    assert noted["delivery_status"] == "delivered", noted["checks"]
    assert [t["code"] for t in noted["checks"]["replay"]["details"]["tolerated"]] == [
        "replay.corrected_edit"
    ]
    strict = Config.load(
        config_toml(tmp_path, repo, trail="optional", tolerant_edits="fail"), environ={}
    )
    failed = pipeline.verify_file(strict, str(tmp_path / "note" / "report.json"), store=False)
    result = failed.verification.to_dict()
    assert result["delivery_status"] == "not_delivered"
    assert _codes(result, "replay") == ["replay.corrected_edit"]


def test_a_file_changed_after_gemini_cli_wrote_it_is_a_replay_mismatch(
    repo: GitRepo, tmp_path: Path
) -> None:
    ran = geminicli.session(
        repo.path,
        tmp_path / "home",
        [geminicli.turn({"replace": FUZZY_FIX}), geminicli.turn("Fixed.")],
        model=geminicli.LEGACY_MODEL,
    )
    assert ran.transcript is not None
    config = Config.load(config_toml(tmp_path, repo, trail="optional"), environ={})
    out = tmp_path / "report.json"
    app.save(app.import_transcript(config, ran.transcript, repo.path), out)
    # Someone else rewrites the file after the session: claims and replay both see it.
    calc = repo.path / "calc.py"
    calc.write_text(calc.read_text() + "\n# appended later\n")
    result = pipeline.verify_file(config, str(out), store=False).verification.to_dict()
    assert result["delivery_status"] == "not_delivered"
    assert _codes(result, "replay") == ["replay.mismatch"]
    assert "change.hash_mismatch" in _codes(result, "changes")


def test_an_absolute_path_in_the_workspace_is_replayed_and_one_outside_it_fails(
    repo: GitRepo, tmp_path: Path
) -> None:
    absolute = {**FUZZY_FIX, "file_path": str((repo.path / "calc.py").resolve())}
    turns = [geminicli.turn({"replace": absolute}), geminicli.turn("Fixed.")]
    result = _verify(repo, tmp_path, turns, geminicli.LEGACY_MODEL)
    assert result["delivery_status"] == "delivered", result["checks"]
    assert result["checks"]["replay"]["details"]["replayed"] == 1

    # The same report, but its call names a file outside the workspace and still succeeded.
    report = json.loads((tmp_path / "report.json").read_bytes())
    call = report["trajectory"]["contents"][1]["parts"][0]["functionCall"]
    call["args"]["file_path"] = "/etc/calc.py"
    report["session_id"] += "-outside"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(report))
    config = Config.load(config_toml(tmp_path, repo, trail="optional"), environ={})
    result = pipeline.verify_file(config, str(forged), store=False).verification.to_dict()
    assert result["delivery_status"] == "not_delivered"
    [finding] = result["checks"]["replay"]["findings"]
    assert (finding["code"], finding["found"]) == ("replay.outside_workspace", "/etc/calc.py")
