"""Benchmark 3: `verifier verify` of one session against running the same pytest suite.

The data: a small real repository (a package of 5 modules, a suite of 50 pytest
tests, one of them failing at base) and a real session report built with the
reference harness (`verifier.agent.harness.run_session`, a scripted model that reads
the module, fixes the bug with a bounded replace and commits). The repository's
configured test command is ``python -m pytest -q``.

The subject is the CLI, ``verifier verify report.json --config cfg --no-store
--format json``, as a subprocess; and the same with the store (a temp SQLite
file named by VERIFIER_DATABASE_URL): each timed run starts from an empty store,
a copy of a store migrated once before the timing (no session, no cached result),
so the tests run for real as on a first verification. A separate row times the
cached case: the same verification again, the store holding this tree's result.
The raw operation is ``python -m pytest -q`` in the repository, as a subprocess.
``python -X importtime`` shows what the CLI's start-up costs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.cputime import CpuMeter, metered
from tests.benchmarks.timing import Result, Row, measure
from tests.support.gitrepo import GitRepo
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.store import Store

TARGET_FACTOR = 1.1
TARGET_SLACK_S = 0.3
TESTS = 50
MODULES = 5
VERIFIER = Path(sys.executable).with_name("verifier")
# The start-up imports worth naming in the write-up (cumulative, where first imported).
IMPORTS = ("verifier.cli.verify", "google.genai", "verifier.store", "sqlalchemy", "git", "click")

BUG = "    return a + b  # the bug\n"
FIX = "    return a - b\n"


def _module(i: int) -> str:
    body = "".join(f"def f{j}(x):\n    return x * {j} + {i}\n\n\n" for j in range(10))
    if i == 0:
        body += "def subtract(a, b):\n" + BUG
    return body


def _tests(i: int) -> str:
    lines = [f"from calc.m{i} import *  # noqa: F403\n", "\n"]
    for j in range(TESTS // MODULES):
        if i == 0 and j == 0:
            lines.append("\ndef test_subtract():\n    assert subtract(5, 3) == 2  # noqa: F405\n")
        else:
            lines.append(f"\ndef test_f{j}():\n    assert f{j}(2) == {2 * j + i}  # noqa: F405\n")
    return "".join(lines)


def build(root: Path) -> tuple[GitRepo, dict[str, object]]:
    """The repository at its base commit, then the session's report (head committed)."""
    repo = GitRepo(root)
    files = {f"calc/m{i}.py": _module(i) for i in range(MODULES)}
    files |= {f"tests/test_m{i}.py": _tests(i) for i in range(MODULES)}
    files |= {
        "calc/__init__.py": "",
        "pytest.ini": "[pytest]\npythonpath = .\n",
        ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
    }
    repo.commit(files, "base")
    line = _module(0).splitlines(keepends=True).index(BUG) + 1
    turns = [
        model_turn(call("read_file", "c1", path="calc/m0.py")),
        model_turn(
            call(
                "replace_lines",
                "c2",
                path="calc/m0.py",
                start_line=line,
                end_line=line,
                expected=BUG,
                replacement=FIX,
            )
        ),
        model_turn("Fixed subtract()."),
    ]
    session = run_session(
        repo.path, "s-bench-verify", "Fix subtract.", ScriptedModel(turns), commit=True
    )
    session.repo_name = "bench"
    return repo, session.report()


def _config(tmp: Path, repo: GitRepo) -> Path:
    command = [sys.executable, "-m", "pytest", "-q"]
    path = tmp / "verifier.toml"
    path.write_text(
        "[verifier]\ntest_timeout = 120\n\n[repositories.bench]\n"
        f"path = {json.dumps(str(repo.path))}\ntest_command = {json.dumps(command)}\n",
        encoding="utf-8",
    )
    return path


def import_times() -> dict[str, float]:
    """Cumulative import time in seconds of `IMPORTS`, importing `verifier.cli.verify` cold."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import verifier.cli.verify"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    found: dict[str, float] = {}
    for m in re.finditer(r"import time:\s+\d+ \|\s+(\d+) \|\s*(\S+)", out):
        name = m.group(2)
        if name in IMPORTS and name not in found:
            found[name] = int(m.group(1)) / 1e6
    return found


def cpu_facts(meter: CpuMeter, names: dict[str, str], raw: str, timed: int) -> dict[str, str]:
    """The CPU medians of the runs `names` gives (run -> label), each also against `raw`'s."""
    if not meter.enabled:
        return {"CPU time": "not measured (no cgroup v1 cpuacct hierarchy we may write)"}
    base = meter.median(raw, timed)
    parts = []
    for name, label in names.items():
        cpu = meter.median(name, timed)
        if cpu is not None:
            ratio = f" ({cpu / base:.2f}x)" if base and name != raw else ""
            parts.append(f"{label} {cpu:.2f} s{ratio}")
    return {"CPU time, median (cgroup cpuacct, the whole process tree)": ", ".join(parts)}


def run(tmp: Path, repeat: int) -> Result:
    return metered(_run, tmp, repeat)


def _run(tmp: Path, repeat: int, meter: CpuMeter) -> Result:
    repo, report = build(tmp / "verify-repo")
    report_path = tmp / "report.json"
    report_path.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    config = _config(tmp, repo)
    env = {**os.environ, "VERIFIER_DATABASE_URL": f"sqlite:///{tmp / 'store.sqlite3'}"}
    verify = [
        str(VERIFIER),
        "verify",
        str(report_path),
        "--config",
        str(config),
        "--format",
        "json",
    ]

    def verify_no_store() -> None:
        done = meter.run("no-store", [*verify, "--no-store"], env=env, check=False)
        verdict = json.loads(done.stdout)
        assert done.returncode == 0, verdict
        assert verdict["checks"]["tests"]["details"]["counts"]["passed"] == TESTS, verdict

    store_file, empty = tmp / "store.sqlite3", tmp / "empty.sqlite3"
    Store.open(f"sqlite:///{empty}").close()  # created and migrated before the timing

    def empty_store() -> None:
        # Untimed, before each run: a first verification, nothing stored, nothing cached.
        shutil.copyfile(empty, store_file)

    def verify_store(*, cached: bool = False) -> None:
        done = meter.run("cached" if cached else "store", verify, env=env, check=False)
        verdict = json.loads(done.stdout)
        assert done.returncode == 0 and "stored" in verdict, verdict
        assert ("cached_from" in verdict["checks"]["tests"]["details"]) is cached, verdict

    def verify_cached() -> None:
        verify_store(cached=True)

    def pytest() -> None:
        cmd = [sys.executable, "-m", "pytest", "-q"]
        done = meter.run("raw", cmd, cwd=repo.path, check=True)
        assert f"{TESTS} passed".encode() in done.stdout

    def version() -> None:
        subprocess.run([str(VERIFIER), "--version"], env=env, capture_output=True, check=True)

    runs = {
        "no-store": verify_no_store,
        "store": verify_store,
        "cached": verify_cached,
        "start": version,
        "raw": pytest,
    }
    t = measure(runs, repeat, setup={"store": empty_store})
    raw = f"python -m pytest -q ({TESTS} tests)"
    target = f"<= {TARGET_FACTOR:g}x + {TARGET_SLACK_S:g} s"
    bound = TARGET_FACTOR * t["raw"] + TARGET_SLACK_S
    rows = [
        Row("verify", "verifier verify --no-store", t["no-store"], raw, t["raw"], target, bound),
        Row(
            "verify",
            "verifier verify (SQLite store, empty: first run)",
            t["store"],
            raw,
            t["raw"],
            target,
            bound,
        ),
        Row("verify", "verifier verify (SQLite store, result cached)", t["cached"], raw, t["raw"]),
        Row("verify", "verifier --version (start-up alone)", t["start"], raw, t["raw"]),
    ]
    imports = import_times()
    facts = {
        "repository": f"{MODULES} modules, {TESTS} pytest tests; the session fixes one bug",
        "python -X importtime -c 'import verifier.cli.verify'": ", ".join(
            f"{name} {imports[name]:.2f} s" for name in IMPORTS if name in imports
        ),
        **cpu_facts(
            meter,
            {"no-store": "--no-store", "store": "store (empty)", "raw": "pytest"},
            "raw",
            repeat,
        ),
    }
    return Result(rows, facts)
