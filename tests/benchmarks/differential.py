"""Benchmark 7: a differential run (issue 18), against the raw runs it cannot beat.

The data is benchmark 3's (`tests.benchmarks.verify_cli.build`): a package of 5
modules, 50 pytest tests, one failing at the base, and a real session that fixes
it. The repository's policy is ``baseline = "differential"``: the verifier tests
the base and the head.

Rows:

* ``verifier verify`` with an empty SQLite store (a copy of a migrated one, so both
  trees are tested), against ``python -m pytest -q`` run twice, once in a checkout of
  the base and once in one of the head, as subprocesses one after the other;
* the same verification on a store that already holds the *base's* result (another
  session on the same base was verified first: only the head is tested), against
  ``verifier verify`` of the same session under ``baseline = "head"`` from an empty
  store: what a cached base adds to a head-only verification.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.timing import Result, Row, measure
from tests.benchmarks.verify_cli import TESTS, VERIFIER, build
from tests.support.gitrepo import GitRepo
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.store import Store

TARGET_FACTOR = 1.1
TARGET_SLACK_S = 0.3
CACHED_TARGET = 1.05


def _config(tmp: Path, repo: GitRepo, baseline: str) -> Path:
    command = [sys.executable, "-m", "pytest", "-q"]
    path = tmp / f"verifier-{baseline}.toml"
    path.write_text(
        "[verifier]\ntest_timeout = 120\n\n[repositories.bench]\n"
        f"path = {json.dumps(str(repo.path))}\ntest_command = {json.dumps(command)}\n"
        f'baseline = "{baseline}"\n',
        encoding="utf-8",
    )
    return path


def _checkout(repo: GitRepo, commit: str, where: Path) -> Path:
    repo.git("worktree", "add", "-q", "--detach", str(where), commit)
    return where


def _other_session(repo: GitRepo, base: str, tmp: Path) -> Path:
    """Another session on the same base (a note added), its report written to a file; the
    repository is put back at the bench session's head afterwards."""
    head = repo.head()
    repo.git("checkout", "-q", base)
    repo.git("checkout", "-q", "-b", "other")
    write = call("write_file", "o1", path="NOTES.md", content="# Notes\n")
    model = ScriptedModel([model_turn(write), model_turn("Added notes.")])
    session = run_session(repo.path, "s-bench-other", "Add notes.", model, commit=True)
    session.repo_name = "bench"
    path = tmp / "other.json"
    path.write_text(json.dumps(session.report(), ensure_ascii=False), encoding="utf-8")
    repo.git("checkout", "-q", "main")
    assert repo.head() == head
    return path


def run(tmp: Path, repeat: int) -> Result:
    repo, report = build(tmp / "diff-repo")
    head = repo.head()
    base = str(report["repo"]["base_commit"])  # type: ignore[index]
    report_path = tmp / "report.json"
    report_path.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    other = _other_session(repo, base, tmp)
    differential, head_only = _config(tmp, repo, "differential"), _config(tmp, repo, "head")
    store_file, empty, base_cached = (
        tmp / "store.sqlite3",
        tmp / "empty.sqlite3",
        tmp / "base-cached.sqlite3",
    )
    Store.open(f"sqlite:///{empty}").close()
    env = {**os.environ, "VERIFIER_DATABASE_URL": f"sqlite:///{store_file}"}

    def verify(config: Path, source: Path = report_path, exits: int = 0) -> dict[str, object]:
        argv = [str(VERIFIER), "verify", str(source), "--config", str(config), "--format", "json"]
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        verdict: dict[str, object] = json.loads(done.stdout)
        assert done.returncode == exits, verdict
        return verdict

    # The store holding the base's result only: the other session (which leaves the bug,
    # so it is not delivered) verified on an empty one.
    shutil.copyfile(empty, store_file)
    verify(differential, other, exits=1)
    shutil.copyfile(store_file, base_cached)

    def tests(verdict: dict[str, object]) -> dict[str, object]:
        return verdict["checks"]["tests"]  # type: ignore[index,no-any-return]

    def first() -> None:
        found = tests(verify(differential))
        assert found["details"]["classification"]["counts"]["fixed"] == 1, found  # type: ignore[index]
        assert found["details"]["classification"]["base"]["cached_from"] is None, found  # type: ignore[index]

    def cached() -> None:
        found = tests(verify(differential))
        base_of = found["details"]["classification"]["base"]["cached_from"]  # type: ignore[index]
        assert base_of == "s-bench-other", found

    def plain() -> None:
        found = tests(verify(head_only))
        assert "classification" not in found["details"], found  # type: ignore[operator]
        assert found["details"]["counts"]["passed"] == TESTS, found  # type: ignore[index]

    at_base = _checkout(repo, base, tmp / "at-base")
    at_head = _checkout(repo, head, tmp / "at-head")

    def pytest_twice() -> None:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        done = subprocess.run(cmd, cwd=at_base, capture_output=True, check=False)
        assert done.returncode == 1 and b"1 failed" in done.stdout, done.stdout
        done = subprocess.run(cmd, cwd=at_head, capture_output=True, check=True)
        assert f"{TESTS} passed".encode() in done.stdout

    def fresh() -> None:
        shutil.copyfile(empty, store_file)

    def base_only() -> None:
        shutil.copyfile(base_cached, store_file)

    runs = {"first": first, "raw": pytest_twice, "cached": cached, "plain": plain}
    t = measure(runs, repeat, setup={"first": fresh, "cached": base_only, "plain": fresh})
    target = f"<= {TARGET_FACTOR:g}x + {TARGET_SLACK_S:g} s"
    rows = [
        Row(
            "differential",
            'verifier verify, baseline = "differential" '
            "(SQLite store, empty: base and head tested)",
            t["first"],
            f"python -m pytest -q twice: base, then head ({TESTS} tests)",
            t["raw"],
            target,
            TARGET_FACTOR * t["raw"] + TARGET_SLACK_S,
        ),
        Row(
            "differential",
            "the same, the base's result cached (another session on the base verified first)",
            t["cached"],
            'verifier verify, baseline = "head" (SQLite store, empty)',
            t["plain"],
            f"<= {CACHED_TARGET:g}x",
            CACHED_TARGET * t["plain"],
        ),
    ]
    facts = {
        "repository": f"benchmark 3's: {TESTS} pytest tests, one failing at the base; the "
        "session fixes it (classified: fixed 1, still passing 49)",
        "base run": "beside the head's, in a thread of the tests check, while the raw "
        "operation runs its two pytest runs one after the other: on 2 cores the first row "
        "gains from that; cached by its tree",
    }
    return Result(rows, facts)
