"""Honest sessions the verifier must deliver, and the lie that looks like one of them.

Each runs the reference harness on a real repository and verifies its report
end to end with `verifier.verify.verify`, with the default configuration plus
the test command.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.support.gitrepo import GitRepo
from tests.support.sessions import BASE, CALC, PYTEST, fixed_session, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import DeliveryStatus, Verification
from verifier.verify import Options, verify

FIXED = CALC.replace("subtract(a, b):\n    return a + b", "subtract(a, b):\n    return a - b")
RUN_SH = "#!/bin/sh\nexec python -m pytest -q\n"


def verify_bytes(raw: bytes, repo: GitRepo, tmp_path: Path) -> Verification:
    repo_cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60
    )
    config = Config(
        database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", repositories={"calc": repo_cfg}
    )
    return verify(parse_report(raw), config, Options(repo_path=repo.path))


def crlf_repo(path: Path) -> GitRepo:
    """The calc repository with ``* text=auto eol=crlf``, checked out with CRLF as git writes it."""
    repo = GitRepo(path)
    repo.commit({**BASE, ".gitattributes": "* text=auto eol=crlf\n"}, "base")
    for rel in BASE:
        (repo.path / rel).unlink()
    repo.git("checkout", "--", ".")
    assert (repo.path / "calc.py").read_bytes().count(b"\r\n") == CALC.count("\n")
    assert repo.git("status", "--porcelain") == ""
    return repo


def test_an_uncommitted_fix_in_a_crlf_repository_is_delivered(tmp_path: Path) -> None:
    """The working tree holds CRLF, the blobs LF: hashed as git stores them, nothing changed."""
    repo = crlf_repo(tmp_path / "calc")
    turns = [
        model_turn(call("read_file", "c1", path="calc.py")),
        model_turn(
            call(
                "replace_lines",
                "c2",
                path="calc.py",
                start_line=6,
                end_line=6,
                expected="    return a + b\r\n",
                replacement="    return a - b\r\n",
            )
        ),
        model_turn("Fixed subtract()."),
    ]
    report = fixed_session(repo, commit=False, turns=turns).report()
    assert [c["path"] for c in report["changes"]] == ["calc.py"]

    verdict = verify_bytes(to_bytes(report), repo, tmp_path)

    assert verdict.delivery_status is DeliveryStatus.DELIVERED, verdict.checks
    assert verdict.checks["changes"].details["changed"] == 1


def chmod_repo(path: Path) -> GitRepo:
    """calc already fixed, and a ``run.sh`` committed without its execute bit."""
    repo = GitRepo(path)
    repo.commit({**BASE, "calc.py": FIXED, "run.sh": RUN_SH}, "base")
    assert repo.git("ls-files", "-s", "run.sh").startswith("100644 ")
    return repo


def chmod_session(repo: GitRepo) -> dict[str, Any]:
    turns = [
        model_turn(call("run_command", "c1", command=["chmod", "+x", "run.sh"])),
        model_turn("run.sh is executable now."),
    ]
    session = run_session(
        repo.path, "s-chmod", "Make run.sh executable.", ScriptedModel(turns), commit=True
    )
    return session.report()


def test_a_committed_chmod_only_change_is_delivered(tmp_path: Path) -> None:
    """``chmod +x run.sh`` and nothing else: claimed as a mode-only modify, and delivered."""
    repo = chmod_repo(tmp_path / "calc")
    report = chmod_session(repo)
    assert repo.git("ls-tree", report["repo"]["head_commit"], "run.sh").startswith("100755 ")
    [claim] = report["changes"]
    assert claim["sha256_before"] == claim["sha256_after"]
    assert (claim["mode_before"], claim["mode_after"]) == ("100644", "100755")

    verdict = verify_bytes(to_bytes(report), repo, tmp_path)

    assert verdict.delivery_status is DeliveryStatus.DELIVERED, verdict.checks


def test_a_mode_claim_that_lies_is_not_delivered(tmp_path: Path) -> None:
    """The claim says run.sh became executable; the head commit never changed its mode.

    The trail is the harness's own, so it agrees with the claim: only the
    repository can tell, and the changes check reads it.
    """
    repo = chmod_repo(tmp_path / "calc")
    report = chmod_session(repo)
    # The agent undoes the chmod in a last commit, and reports the first one's head.
    os.chmod(repo.path / "run.sh", 0o644)
    report["repo"]["head_commit"] = repo.commit(msg="undo")
    assert repo.git("ls-tree", "HEAD", "run.sh").startswith("100644 ")

    verdict = verify_bytes(json.dumps(report).encode(), repo, tmp_path)

    assert verdict.delivery_status is DeliveryStatus.NOT_DELIVERED
    changes = verdict.checks["changes"]
    assert [(f.code, f.path, f.expected, f.found) for f in changes.findings] == [
        ("change.mode_mismatch", "run.sh", "100755", "100644")
    ]
