"""Benchmark: `verifier gate --rev-range` over 500 commits, against rev-list + one SELECT.

The data: a git repository of 1,000 commits in a line (written with
``git fast-import``, each changing one file), and a SQLite store of 2,000
sessions (`tests.benchmarks.fill`) whose head commits are those 1,000 commits,
two sessions each; the range is the last 500 commits, so 1,000 sessions are
selected, some not delivered (the gate blocks) and some inconclusive or pending.

The subject is what ``verifier gate --rev-range BASE..HEAD --repo R`` does once
click has read its options: `gate.resolve_selection` (both ends resolved and
checked with git, then ``git rev-list``), the store opened read-only,
`StoreSource.read` (the sessions by head commit, 200 commits per query, each
session with its verdict run and findings) and `gate.decide`: the decision row.
One more row per format adds the output, `gate_formats.render` in the default
``text`` (the table of every selected session and the lines of those that block),
``json``, ``junit``, ``github`` and ``sarif``: each held to the same target. The raw
operation: ``git rev-list BASE..HEAD`` as a subprocess, then one sqlite3
``SELECT session_id, delivery_status, override_status FROM sessions WHERE
head_commit IN (...)`` of the 500 commits.
Target: <= 2x. Each row is given twice: in wall time, and in CPU time (this process's
and its children's, git's: `resource.getrusage`), measured in turns the same way, which
moves far less with the machine's load.
"""

from __future__ import annotations

import resource
import sqlite3
import statistics
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.benchmarks.fill import fill_sqlite
from tests.benchmarks.timing import Result, Row, measure

COMMITS = 1_000
RANGE = 500
SESSIONS = 2_000
TARGET = 2.0
_GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}


def _repository(root: Path) -> list[str]:
    """A repository of `COMMITS` commits in a line; their ids, oldest first."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=_GIT_ENV)
    stream = []
    for i in range(1, COMMITS + 1):
        content = f"value = {i}\n".encode()
        message = f"commit {i}\n".encode()
        stream.append(
            b"commit refs/heads/main\n"
            + f"mark :{i}\n".encode()
            + f"committer Bench <bench@example.com> {1_700_000_000 + i} +0000\n".encode()
            + f"data {len(message)}\n".encode()
            + message
            + (f"from :{i - 1}\n".encode() if i > 1 else b"")
            + f"M 100644 inline src/file_{i % 50}.py\n".encode()
            + f"data {len(content)}\n".encode()
            + content
            + b"\n"
        )
    subprocess.run(
        ["git", "fast-import", "--quiet"], input=b"".join(stream), cwd=root, check=True,
        env=_GIT_ENV,
    )  # fmt: skip
    listed = subprocess.run(
        ["git", "rev-list", "--reverse", "main"], cwd=root, capture_output=True, check=True,
        env=_GIT_ENV,
    )  # fmt: skip
    commits = listed.stdout.decode().split()
    assert len(commits) == COMMITS
    return commits


def _cpu_s() -> float:
    mine, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def cpu_medians(runs: Mapping[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The median CPU time of each run (with the processes it waited for), in turns as
    `timing.measure` takes them, after its warm-up."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, call in runs.items():
            start = _cpu_s()
            call()
            times[name].append(_cpu_s() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def run(tmp: Path, repeat: int) -> Result:
    from verifier.app import gate
    from verifier.formats import gate as gate_formats

    repo = tmp / "repo"
    commits = _repository(repo)
    db = tmp / "gate.sqlite3"
    url = fill_sqlite(db, SESSIONS, head_commits=commits)
    base, head = commits[COMMITS - RANGE - 1], commits[-1]
    rev_range = f"{base}..{head}"

    def decision() -> gate.Decision:
        selection = gate.resolve_selection(rev_ranges=(rev_range,), repo=repo)
        source = gate.StoreSource(url)
        try:
            sessions = source.read(selection)
        finally:
            source.close()
        return gate.decide(sessions, selection, source=source.description)

    def with_output(fmt: str) -> str:
        return gate_formats.render(decision(), fmt)

    def baseline() -> list[tuple[str, str, str | None]]:
        listed = subprocess.run(
            ["git", "rev-list", rev_range], cwd=repo, capture_output=True, check=True
        )
        in_range = listed.stdout.decode().split()
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return connection.execute(
                "SELECT session_id, delivery_status, override_status FROM sessions "
                f"WHERE head_commit IN ({', '.join('?' * len(in_range))})",
                in_range,
            ).fetchall()
        finally:
            connection.close()

    decided = decision()
    found = baseline()
    assert len(decided.sessions) == len(found) == SESSIONS * RANGE // COMMITS, (
        len(decided.sessions),
        len(found),
    )
    assert decided.exit_code == gate.BLOCKED, decided.reason
    runs = {
        "decision": decision,
        **{fmt: (lambda fmt=fmt: with_output(fmt)) for fmt in gate_formats.FORMATS},
        "baseline": baseline,
    }
    t = measure(runs, repeat)
    cpu = cpu_medians(runs, repeat)
    what = f"--rev-range of {RANGE} commits, {SESSIONS:,} sessions (SQLite)"
    raw_name = "git rev-list + one SELECT ... WHERE head_commit IN (...)"
    rows = []
    for times, kind in ((t, ""), (cpu, ", CPU time")):
        rows.append(
            Row(
                "gate",
                f"gate decision (resolve, read, decide), {what}{kind}",
                times["decision"],
                raw_name + kind,
                times["baseline"],
                f"<= {TARGET:g}x",
                times["baseline"] * TARGET,
            )
        )
        rows += [
            Row(
                "gate",
                f"gate with --format {fmt}{' (the default output)' if fmt == 'text' else ''}, "
                f"{what}{kind}",
                times[fmt],
                raw_name + kind,
                times["baseline"],
                f"<= {TARGET:g}x",
                times["baseline"] * TARGET,
            )
            for fmt in gate_formats.FORMATS
        ]
    facts = {
        "data": f"{COMMITS:,} commits in a line, {SESSIONS:,} sessions (2 per commit); the range "
        f"selects {len(found):,}; decision: {decided.reason}"
    }
    return Result(rows, facts)
