"""Honest sessions the defences must not refuse, with the default configuration.

Tests that write files into their working directory (the copy is writable in the
sandbox) and an uncommitted session that creates a file (worktree mode hashes it
into the comparison between the changes check and the copy) are `delivered`.
The chmod-only and CRLF counterparts are in test_honest_sessions.py.
"""

from __future__ import annotations

from typing import Any

from tests.support.gitrepo import GitRepo
from tests.support.sessions import FIX, PYTEST, TESTS, fixed_session, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus, Verification
from verifier.verify import verify

# A base test that writes a report, a cache file and a folder into its working directory,
# as reporters and fixtures do, and reads them back.
WRITES = TESTS + (
    "\n\ndef test_writes_into_its_working_directory():\n"
    "    from pathlib import Path\n"
    "    Path('build/out').mkdir(parents=True)\n"
    "    Path('build/out/report.txt').write_text('ok')\n"
    "    Path('cache.db').write_bytes(b'x')\n"
    "    assert Path('build/out/report.txt').read_text() == 'ok'\n"
)
HELPER = "def twice(x):\n    return 2 * x\n"


def verdict(repo: GitRepo, report: dict[str, Any]) -> Verification:
    calc = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    before = repo.snapshot()
    result = verify(parse_report(to_bytes(report)), Config(repositories={"calc": calc}))
    assert repo.snapshot() == before, "verify modified the repository"
    return result


def _delivered(v: Verification) -> None:
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    tests = v.checks["tests"]
    assert (tests.status, tests.findings) == (CheckStatus.PASS, ())


def test_tests_that_write_into_their_working_directory_are_delivered(repo: GitRepo) -> None:
    repo.commit({"tests/test_calc.py": WRITES}, "a test that writes files")

    v = verdict(repo, fixed_session(repo).report())

    _delivered(v)
    assert v.checks["tests"].details["counts"]["passed"] == 3
    assert not (repo.path / "build").exists() and not (repo.path / "cache.db").exists()


def test_an_uncommitted_session_that_creates_a_file_is_delivered(repo: GitRepo) -> None:
    turns = [
        model_turn(call("write_file", "new", path="helpers.py", content=HELPER)),
        model_turn(call("replace_lines", "fix", **FIX)),
        model_turn("Fixed subtract() and added a helper."),
    ]
    session = run_session(repo.path, "s-new", "Fix subtract.", ScriptedModel(turns), commit=False)
    report = session.report()
    assert report["repo"]["head_commit"] is None  # worktree mode
    assert {c["path"] for c in report["changes"]} == {"calc.py", "helpers.py"}

    v = verdict(repo, report)

    _delivered(v)
    assert v.checks["tests"].details["mode"] == "worktree"
    assert v.checks["tests"].details["snapshot"]["files"] == 5  # helpers.py copied, hashed
