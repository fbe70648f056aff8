"""``verifier gemini-cli import``: a real gemini-cli transcript to a report, on stdout or in a
file; a transcript that cannot be read is exit 2, naming the line and the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import geminicli
from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml


def verifier(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
        check=False,
    )


def test_import_writes_a_report_without_a_trail_that_verify_reads(
    repo: GitRepo, tmp_path: Path
) -> None:
    note = {"file_path": str(repo.path / "NOTES.md"), "content": "subtract is wrong\n"}
    ran = geminicli.session(
        repo.path,
        tmp_path / "home",
        [geminicli.turn({"write_file": note}), geminicli.turn("Noted.")],
        prompt="Take a note.",
    )
    assert ran.transcript is not None, ran.stderr[-2000:]
    config = config_toml(tmp_path, repo)
    done = verifier(
        "gemini-cli",
        "import",
        str(ran.transcript),
        "--repo",
        str(repo.path),
        "--config",
        str(config),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["audit"] == {"trail": "none", "entries": [], "count": 0, "head": None}
    assert [c["path"] for c in report["changes"]] == ["NOTES.md"]

    out = tmp_path / "report.json"
    done = verifier(
        "gemini-cli",
        "import",
        str(ran.transcript),
        "--repo",
        str(repo.path),
        "--config",
        str(config),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}: session gemini-cli-" in done.stdout and "no audit trail" in done.stdout
    assert json.loads(out.read_bytes()) == report

    verified = verifier(
        "verify", str(out), "--config", str(config), "--no-store", "--format", "json"
    )
    # The note leaves subtract() broken: not delivered, whatever the missing trail leaves open.
    assert verified.returncode == 1, verified.stderr
    checks = json.loads(verified.stdout)["checks"]
    assert checks["tests"]["status"] == "fail"
    assert [f["code"] for f in checks["audit"]["findings"]] == ["audit.no_trail"]


def test_an_unreadable_transcript_is_exit_2_naming_line_and_field(
    repo: GitRepo, tmp_path: Path
) -> None:
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(
        json.dumps({"sessionId": "s", "projectHash": "p"})
        + "\n"
        + json.dumps(
            {"id": "m1", "type": "gemini", "toolCalls": [{"id": "c", "name": "x", "args": 3}]}
        )
        + "\n"
    )
    done = verifier("gemini-cli", "import", str(transcript), "--repo", str(repo.path))
    assert done.returncode == 2
    assert "line 2, field 'toolCalls.0.args': expected an object, got an integer" in done.stderr
    assert done.stdout == ""
