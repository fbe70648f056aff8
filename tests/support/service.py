"""Helpers of the service tests: sessions by the hundred, configurations, worker processes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from tests.support.gitrepo import GitRepo
from tests.support.paths import ROOT
from tests.support.sessions import fixed_session, to_bytes
from verifier.agent.harness import Session

PYTHON = sys.executable
# A test command that is quick, and counted by its exit code (results = "exit-code").
QUICK = [PYTHON, "-c", "pass"]
# Seconds a worker waits without a heartbeat before it is taken for dead, in the tests.
STALLED_AFTER_S = 2
# Liveness bound of the waits below (not a timing assertion: a slow machine passes).
PATIENCE_S = 300.0

# The first run of this command blocks until its FIFO is written (so "the middle of a
# test run" is a known moment); it writes its pid and its parent's (the worker) first.
# Every later run passes at once.
BLOCK_ONCE = """
import os, sys
d = sys.argv[1]
try:
    fd = os.open(os.path.join(d, "first"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
except FileExistsError:
    sys.exit(0)
os.write(fd, f"{os.getpid()} {os.getppid()}".encode())
os.close(fd)
open(os.path.join(d, "fifo")).read()
"""


def block_once(folder: Path) -> list[str]:
    """The command of `BLOCK_ONCE`, with its folder and FIFO made."""
    folder.mkdir(parents=True, exist_ok=True)
    os.mkfifo(folder / "fifo")
    return [PYTHON, "-c", BLOCK_ONCE, str(folder)]


def blocked_pids(folder: Path) -> tuple[int, int] | None:
    """(test process, worker process) once the first run has started; else None."""
    try:
        text = (folder / "first").read_text()
    except FileNotFoundError:
        return None
    parts = text.split()
    return (int(parts[0]), int(parts[1])) if len(parts) == 2 else None


def kill_quietly(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def sessions(repo: GitRepo, count: int, prefix: str = "s") -> list[bytes]:
    """`count` reports of one clean session, each under its own id (its audit sealed anew)."""
    session: Session = fixed_session(repo, f"{prefix}-0")
    return [
        to_bytes(dataclasses.replace(session, session_id=f"{prefix}-{i:04d}").report())
        for i in range(count)
    ]


def write_config(
    tmp: Path,
    repo: GitRepo,
    command: list[str],
    *,
    database_url: str | None = None,
    isolation: str = "off",
    results: str = "exit-code",
    repo_path: Path | None = None,
    test_result_cache: bool = True,
    **service: Any,
) -> Path:
    """A configuration file: repository `calc` with `command` counted by its exit code,
    by default no sandbox (the commands here talk to the test through the host's files),
    and [service] settings for runs that take seconds."""
    settings = {
        "stalled_after_s": STALLED_AFTER_S,
        "maintenance_cron": "* * * * * */1",
        **service,
    }
    lines = ["[verifier]", f"network_isolation = {json.dumps(isolation)}", "test_timeout = 120"]
    lines.append(f"test_result_cache = {json.dumps(test_result_cache)}")
    if database_url is not None:
        lines.append(f"database_url = {json.dumps(database_url)}")
    path = repo.path if repo_path is None else repo_path
    lines += ["", "[repositories.calc]", f"path = {json.dumps(str(path))}"]
    lines += [f"test_command = {json.dumps(command)}", f"results = {json.dumps(results)}", ""]
    lines += ["[service]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    config = tmp / "verifier.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def libpq_secret_parts(url: str) -> list[str]:
    """What of a database URL must never reach a test run: the URL, its libpq form, the
    database's name (unique per test) and the password when there is one."""
    from sqlalchemy.engine import make_url

    from verifier.store.queue import libpq_conninfo

    parsed = make_url(url)
    parts = [url, libpq_conninfo(url), str(parsed.database)]
    return parts + ([str(parsed.password)] if parsed.password else [])


def environment(config: Path, database_url: str) -> dict[str, str]:
    """The environment of a verifier process of the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env.update(
        VERIFIER_CONFIG=str(config),
        VERIFIER_DATABASE_URL=database_url,
        PYTHONPATH=str(ROOT),
    )
    return env


def start_worker(
    config: Path, database_url: str, log: Path, concurrency: int = 1
) -> subprocess.Popen[bytes]:
    """`verifier worker` as its own process, its output in `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [PYTHON, "-m", "verifier", "worker", "--concurrency", str(concurrency)],
            env=environment(config, database_url),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )


@contextmanager
def workers(
    count: int, config: Path, database_url: str, logs: Path, concurrency: int = 1
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` worker processes, stopped (SIGTERM, then SIGKILL) on the way out."""
    logs.mkdir(parents=True, exist_ok=True)
    procs = [
        start_worker(config, database_url, logs / f"worker-{i}.log", concurrency)
        for i in range(count)
    ]
    try:
        yield procs
    finally:
        stop(procs)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(what: str, condition: Callable[[], Any], patience_s: float = PATIENCE_S) -> Any:
    """Poll `condition` until it is truthy; fail after `patience_s` saying what never came."""
    end = time.monotonic() + patience_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.1)


def logs_of(folder: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in sorted(folder.glob("*"))
    )
