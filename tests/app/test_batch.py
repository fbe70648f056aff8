"""`verify --batch`: many sessions on real repositories, the first of each base before the
others of its base, one summary; a line that cannot be verified is refused alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fix_turns, fixed_session, to_bytes
from verifier.app import tasks
from verifier.app.batch import read_batch, verify_batch
from verifier.config import Config, RepositoryConfig
from verifier.errors import ConfigError
from verifier.formats import render
from verifier.store import Store

WRONG = "    return a * b\n"


def config(repo: GitRepo, tmp_path: Path) -> Config:
    repo_cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60
    )
    return Config(
        database_url=f"sqlite:///{tmp_path / 'batch.sqlite3'}",
        repositories={"calc": repo_cfg},
        source=tmp_path / "verifier.toml",
    )


def test_a_batch_verifies_each_session_orders_them_by_base_and_sums_them_up(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path)
    tasks.add(cfg, "calc-sub", fail_to_pass=["tests/test_calc.py::test_subtract"], actor="t")
    base_a = repo.head()
    first = fixed_session(repo, "a-fixed").report()  # base A, a real fix
    repo.git("reset", "-q", "--hard", base_a)
    wrong = fixed_session(repo, "a-wrong", turns=fix_turns(WRONG)).report()  # base A
    repo.git("reset", "-q", "--hard", base_a)
    repo.commit({"README.md": "calc\n"}, "a second base")
    again = fixed_session(repo, "b-fixed").report()  # base B
    for report in (first, wrong, again):
        report["task_id"] = "calc-sub"
    unknown = {**again, "session_id": "b-unknown", "task_id": "calc-404"}
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "a-fixed.json").write_bytes(to_bytes(first))
    lines = [
        json.dumps({"report": "reports/a-fixed.json"}),
        to_bytes(wrong).decode(),
        to_bytes(again).decode(),
        "",
        "{not json",
        json.dumps({"report": "reports/missing.json"}),
        to_bytes(unknown).decode(),
    ]
    batch_file = tmp_path / "batch.jsonl"
    batch_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    heard: list[str] = []

    done = verify_batch(cfg, batch_file, jobs=2, progress=heard.append)

    statuses = [(r.entry.line, r.entry.session_id, r.status) for r in done.results]
    assert statuses == [
        (1, "a-fixed", "delivered"),
        (2, "a-wrong", "not_delivered"),
        (3, "b-fixed", "delivered"),
        (5, None, "refused"),
        (6, None, "refused"),
        (7, "b-unknown", "refused"),
    ]
    assert done.counts() == {
        "sessions": 6,
        "resolved": 2,
        "unresolved": 1,
        "inconclusive": 0,
        "refused": 3,
    }
    assert done.bases == 2
    assert done.tasks()["calc-sub"] == {"sessions": 3, "resolved": 2}
    assert done.results[1].outcome is not None
    # The wrong fix leaves the task's acceptance test failing: the operator's task counted.
    first = done.results[1].outcome.verification.first_finding
    assert first is not None and first.code == "tests.acceptance_not_fixed"
    refused = {r.entry.line: r.to_dict()["error"] for r in done.results if r.status == "refused"}
    assert "line 5: not JSON" in refused[5]["problem"]
    assert "cannot read report" in refused[6]["problem"]
    assert refused[7]["code"] == "unknown_task" and refused[7]["field"] == "task_id"
    # The first session of each base was verified before the others of its base: the
    # first two verified are a-fixed (base A, line 1) and b-fixed (base B's only one)...
    verified = [line.split(": ", 1)[1] for line in heard if ": " in line and "refused" not in line]
    assert set(verified[:2]) == {"a-fixed", "b-fixed"}
    assert verified[2] == "a-wrong"
    # ... and each was stored as a run; the refused ones left nothing.
    with Store.open(cfg.database_url) as store:
        assert sorted(s.session.session_id for s in store.sessions()) == [
            "a-fixed",
            "a-wrong",
            "b-fixed",
        ]
    assert done.exit_code == 3  # a refused task: the batch could not judge everything
    text = render.batch_text(done)
    assert "resolved 2 of 3 judged (67%)" in text and "per task: calc-sub 2/3" in text
    assert "6 sessions on 2 bases, 2 at a time" in text
    assert json.loads(render.batch_json(done))["results"][1]["first_finding"]["code"] == (
        "tests.acceptance_not_fixed"
    )


def test_a_batch_file_is_read_line_by_line_and_an_empty_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text('[1]\n{"report": "x.json", "repo": "y"}\n{"report": 3}\n', encoding="utf-8")
    problems = [e.problem for e in read_batch(path, 1000)]
    assert problems == [
        "line 1: expected an object, got list",
        "line 2: unknown key 'repo' (expected report)",
        "line 3: report: expected the path of a report file",
    ]
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="holds no session"):
        read_batch(path, 1000)


def test_fifty_sessions_on_five_bases_test_each_base_once(repo: GitRepo, tmp_path: Path) -> None:
    """The issue's figure: a batch of 50 sessions on 5 bases runs the base tests 5 times.

    Each verification says where its base run came from (`cached_from`: None when it
    ran); exactly one session per base ran it, and the other nine reused that run.
    """
    cfg = config(repo, tmp_path)
    tasks.add(cfg, "calc-sub", fail_to_pass=["tests/test_calc.py::test_subtract"], actor="t")
    lines: list[str] = []
    base_of: dict[str, str] = {}
    for b in range(5):
        repo.commit({"README.md": f"calc, base {b}\n"}, f"base {b}")
        base = repo.head()
        for i in range(10):
            repo.git("reset", "-q", "--hard", base)
            report = fixed_session(repo, f"s-{b}-{i}").report()
            report["task_id"] = "calc-sub"
            lines.append(to_bytes(report).decode())
            base_of[f"s-{b}-{i}"] = base
        repo.git("reset", "-q", "--hard", base)
    batch_file = tmp_path / "fifty.jsonl"
    batch_file.write_text("\n".join(lines) + "\n", encoding="utf-8")

    done = verify_batch(cfg, batch_file, jobs=2, progress=lambda _: None)

    assert done.counts()["resolved"] == 50 and done.bases == 5
    ran: dict[str, list[str]] = {}
    for result in done.results:
        assert result.outcome is not None and result.entry.session_id is not None
        tests = result.outcome.verification.checks["tests"]
        if tests.details["classification"]["base"]["cached_from"] is None:
            ran.setdefault(base_of[result.entry.session_id], []).append(result.entry.session_id)
    assert sorted(ran) == sorted(set(base_of.values()))  # every base ran once...
    assert all(len(sessions) == 1 for sessions in ran.values()), ran  # ... and only once
