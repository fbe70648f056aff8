"""Benchmark: `verifier verify` on a real project's whole suite, against pytest alone.

The data: more-itertools 10.7.0, its sdist downloaded at bench time with pip
(never committed), made a git repository; a session built with the reference
harness reads ``more_itertools/more.py``, adds a comment to its first line with
a bounded replace, and commits. Its whole suite (about 700 tests and 12,000
subtests) is the configured test command, ``python -m pytest -q tests``.

The subject is ``verifier verify report.json --config cfg --format json`` with
the SQLite store, as a subprocess, each timed run from an empty store (a copy of
one migrated before the timing: no session, no cached result, so the suite runs);
the raw operation is ``python -m pytest -q tests`` in the repository. What the
verifier adds is start-up, the checks and the sandbox; on a suite of 13 s that
should vanish. Target: ≤ 1.05× + 0.3 s. A second row times the cached case: the
same verification with the store holding the tree's result.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.benchmarks.cputime import CpuMeter, metered
from tests.benchmarks.timing import Result, Row, measure
from tests.benchmarks.verify_cli import cpu_facts
from tests.support.gitrepo import GitRepo
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.store import Store

PROJECT, VERSION = "more-itertools", "10.7.0"
TARGET_FACTOR = 1.05
TARGET_SLACK_S = 0.3
VERIFIER = Path(sys.executable).with_name("verifier")


def fetch(tmp: Path) -> Path:
    """The sdist, unpacked; pip's cache makes later runs free."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         f"{PROJECT}=={VERSION}", "-d", str(tmp / "sdist")],
        check=True, capture_output=True,
    )  # fmt: skip
    (archive,) = (tmp / "sdist").glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp / "src", filter="data")
    (root,) = (tmp / "src").iterdir()
    return root


def build(tmp: Path) -> tuple[GitRepo, dict[str, object]]:
    source = fetch(tmp)
    repo = GitRepo(source)
    repo.commit(None, "more-itertools 10.7.0")
    first = (source / "more_itertools" / "more.py").read_text(encoding="utf-8").splitlines(True)[0]
    turns = [
        model_turn(call("read_file", "c1", path="more_itertools/more.py")),
        model_turn(
            call(
                "replace_lines",
                "c2",
                path="more_itertools/more.py",
                start_line=1,
                end_line=1,
                expected=first,
                replacement=first.rstrip("\n") + "  # verified\n",
            )
        ),
        model_turn("Annotated."),
    ]
    session = run_session(source, "s-bench-real", "Annotate.", ScriptedModel(turns), commit=True)
    session.repo_name = "more-itertools"
    return repo, session.report()


def run(tmp: Path, repeat: int) -> Result:
    return metered(_run, tmp, repeat)


def _run(tmp: Path, repeat: int, meter: CpuMeter) -> Result:
    repo, report = build(tmp)
    report_path = tmp / "report.json"
    report_path.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-q", "tests"]
    config = tmp / "verifier.toml"
    config.write_text(
        "[verifier]\ntest_timeout = 600\n\n[repositories.more-itertools]\n"
        f"path = {json.dumps(str(repo.path))}\ntest_command = {json.dumps(command)}\n",
        encoding="utf-8",
    )
    store_file, empty = tmp / "store.sqlite3", tmp / "empty.sqlite3"
    Store.open(f"sqlite:///{empty}").close()  # created and migrated before the timing
    env = {**os.environ, "VERIFIER_DATABASE_URL": f"sqlite:///{store_file}"}

    def empty_store() -> None:
        shutil.copyfile(empty, store_file)  # untimed: a first verification

    def verify(*, cached: bool = False) -> None:
        argv = [str(VERIFIER), "verify", str(report_path), "--config", str(config), "--format",
                "json"]  # fmt: skip
        done = meter.run("cached" if cached else "verify", argv, env=env, check=False)
        verdict = json.loads(done.stdout)
        assert done.returncode == 0, verdict
        assert verdict["checks"]["tests"]["details"]["counts"]["passed"] > 600, verdict
        assert ("cached_from" in verdict["checks"]["tests"]["details"]) is cached, verdict

    def verify_cached() -> None:
        verify(cached=True)

    def pytest() -> None:
        done = meter.run("raw", command, cwd=repo.path, check=True)
        assert b" passed" in done.stdout

    # A 13-second suite: three turns are enough for a median.
    runs = {"verify": verify, "cached": verify_cached, "raw": pytest}
    t = measure(runs, min(repeat, 3), setup={"verify": empty_store})
    target = f"<= {TARGET_FACTOR:g}x + {TARGET_SLACK_S:g} s"
    bound = TARGET_FACTOR * t["raw"] + TARGET_SLACK_S
    raw = f"python -m pytest -q tests ({PROJECT} {VERSION})"
    rows = [
        Row("real project", "verifier verify (SQLite store, empty: first run)", t["verify"], raw,
            t["raw"], target, bound),
        Row("real project", "verifier verify (SQLite store, result cached)", t["cached"], raw,
            t["raw"]),
    ]  # fmt: skip
    facts = {
        "repository": f"{PROJECT} {VERSION} from its sdist; the session edits one line",
        **cpu_facts(
            meter, {"verify": "verify (empty store)", "raw": "pytest"}, "raw", min(repeat, 3)
        ),
    }
    return Result(rows, facts)
