"""Benchmark: the gemini-cli hook's cost per event, against starting the same interpreter.

gemini-cli starts the hook (``python -I -m audit.geminicli.hook``) as a new process for
every event, so its wall time is added to every tool call. The data: a real git
repository of 2,000 Python-looking text files of 1-4 KiB (seeded) in 40 folders,
one commit, and a session started in it (``SessionStart``).

Subjects, each the whole process as gemini-cli runs it (the event JSON on stdin,
``{}`` read back):

* ``AfterTool`` of ``write_file`` (one file written by the tool since its
  ``BeforeTool``, which runs untimed before each): the named file hashed again, its
  effect computed and kept, fsynced. Target: a median at most 60 ms above the floor;
* ``BeforeTool`` of ``write_file``: the named file hashed, kept;
* ``AfterTool`` of ``run_shell_command``: the whole tree hashed against the hash cache
  the ``BeforeTool`` left (one file changed).

The floor is ``python -I -c pass`` with the same interpreter: what any hook written
in Python costs before it does anything.
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.benchmarks.changes import _source
from tests.benchmarks.timing import Result, Row, measure
from tests.support.gitrepo import GitRepo

FILES = 2_000
FOLDERS = 40
TARGET_OVER_FLOOR_S = 0.060
HOOK = [sys.executable, "-I", "-m", "audit.geminicli.hook"]


def build(root: Path) -> GitRepo:
    rng = random.Random(2000)
    repo = GitRepo(root)
    files = {
        f"pkg{i % FOLDERS:02d}/mod_{i:04d}.py": _source(rng, rng.randint(1 << 10, 4 << 10))
        for i in range(FILES)
    }
    repo.commit(files, "2,000 files")
    return repo


def run(tmp: Path, repeat: int) -> Result:
    repo = build(tmp / "hook-repo")
    base = {"session_id": "bench-1", "cwd": str(repo.path), "transcript_path": ""}
    target = repo.path / "pkg00" / "mod_0000.py"
    written = {"file_path": str(target), "content": "x = 1\n"}
    shell = {"command": "echo y > pkg01/mod_0001.py"}
    counter = [0]

    def event(name: str, **fields: object) -> None:
        done = subprocess.run(
            HOOK,
            input=json.dumps({**base, "hook_event_name": name, **fields}).encode(),
            cwd=repo.path,
            capture_output=True,
            timeout=60,
            check=True,
        )
        assert done.stdout.strip() == b"{}", done

    def before_write() -> None:
        event("BeforeTool", tool_name="write_file", tool_input=written)
        counter[0] += 1
        target.write_text(f"x = {counter[0]}\n")

    def before_shell() -> None:
        event("BeforeTool", tool_name="run_shell_command", tool_input=shell)
        counter[0] += 1
        (repo.path / "pkg01" / "mod_0001.py").write_text(f"y = {counter[0]}\n")

    def after_write_pending() -> None:
        # BeforeTool timed on its own: its AfterTool afterwards, untimed, keeps pairs whole.
        event("AfterTool", tool_name="write_file", tool_input=written, tool_response={})

    # CPU time too (the process and the git it waited for): under the load of a shared
    # machine wall time is mostly waiting for a core, and CPU time is the fairer measure.
    cpu: dict[str, list[float]] = {}

    def on_cpu(name: str, run: Callable[[], object]) -> Callable[[], object]:
        def timed() -> None:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            run()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            spent = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            cpu.setdefault(name, []).append(spent)

        return timed

    event("SessionStart", source="startup")
    times = measure(
        {
            "floor": on_cpu(
                "floor", lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)
            ),
            "after_write": on_cpu(
                "after_write",
                lambda: event(
                    "AfterTool", tool_name="write_file", tool_input=written, tool_response={}
                ),
            ),
            "before_write": lambda: event("BeforeTool", tool_name="write_file", tool_input=written),
            "after_shell": lambda: event(
                "AfterTool", tool_name="run_shell_command", tool_input=shell, tool_response={}
            ),
        },
        repeat,
        setup={
            "after_write": before_write,
            "before_write": lambda: None,
            "after_shell": before_shell,
        },
    )
    # Each timed BeforeTool left a call pending: answer them (untimed) so the session is whole.
    for _ in range(repeat + 1):
        after_write_pending()
    floor = times["floor"]
    cpu_write = statistics.median(cpu["after_write"][1:])  # the warm-up left out
    cpu_floor = statistics.median(cpu["floor"][1:])
    rows = [
        Row(
            "hook",
            "AfterTool write_file (2,000-file repo)",
            times["after_write"],
            "python -I -c pass",
            floor,
            target=f"<= floor + {TARGET_OVER_FLOOR_S * 1000:.0f} ms",
            bound_s=floor + TARGET_OVER_FLOOR_S,
        ),
        Row(
            "hook",
            "AfterTool write_file, CPU time (its process and git's)",
            cpu_write,
            "python -I -c pass, CPU time",
            cpu_floor,
        ),
        Row("hook", "BeforeTool write_file", times["before_write"], "python -I -c pass", floor),
        Row(
            "hook",
            "AfterTool run_shell_command (whole tree, hash cache)",
            times["after_shell"],
            "python -I -c pass",
            floor,
        ),
    ]
    facts = {
        "data": f"{FILES:,} files of 1-4 KiB in {FOLDERS} folders, one commit",
        "over the floor": ", ".join(
            f"{name} +{(times[name] - floor) * 1000:.0f} ms"
            for name in ("after_write", "before_write", "after_shell")
        ),
        "CPU over the floor": f"after_write +{(cpu_write - cpu_floor) * 1000:.0f} ms",
    }
    return Result(rows, facts)
