"""Run one command the way the verifier runs anything it does not trust.

An argument list, never a shell; an explicit `cwd`; a minimal environment with
no secrets (`minimal_env`); stdin closed; a timeout after which the whole
process group is killed; optionally a sandbox (`unshare`): a user namespace with
an empty network namespace, its own PID namespace (the verifier's processes and
their environment are out of sight, and nothing survives the run), and its own
mount namespace where the paths in `hide` (the checked repository, our
configuration and database, credential files) are covered by empty read-only
mounts before the command starts. The output is read as it comes, so a chatty
process cannot block on a full pipe, and kept as a bounded excerpt (head and
tail) beside the SHA-256 and size of the whole log.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verifier.cancel import CancelToken
from verifier.errors import Cancelled, InfrastructureError

__all__ = [
    "RunOutcome",
    "RunnerNotFound",
    "SandboxUnavailable",
    "minimal_env",
    "network_isolation_available",
    "run",
]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_UNSHARE = ("unshare", "-rnm", "--pid", "--fork", "--kill-child", "--mount-proc", "--")
# unshare, or our trampoline, report an exec failure with these prefixes and status 127.
_EXEC_FAILED = (b"unshare: failed to execute", b"verifier-sandbox: cannot execute")
_SANDBOX = Path(__file__).with_name("_sandbox.py")
_READ_CHUNK = 65536
# After the main process has gone, how long we wait for the pipe to close.
_DRAIN_S = 2.0


class SandboxUnavailable(InfrastructureError):
    """The sandbox was required and could not be set up on this machine."""


class RunnerNotFound(InfrastructureError):
    """The program to run does not exist (or cannot be executed) on this machine."""

    def __init__(self, binary: str, search_path: str, detail: str = "") -> None:
        self.binary = binary
        self.search_path = search_path
        message = f"cannot find executable {binary!r} (PATH searched: {search_path!r})"
        super().__init__(f"{message}: {detail}" if detail else message)


@dataclass(frozen=True)
class RunOutcome:
    """What a run did. `exit_code` is None when the run was killed at its timeout."""

    argv: tuple[str, ...]
    executable: str
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output_excerpt: str
    output_sha256: str
    output_bytes: int
    network_isolated: bool
    hidden: tuple[str, ...] = ()


def minimal_env(home: Path, tmp: Path) -> dict[str, str]:
    """The whole environment of a child: a PATH, a throwaway HOME and TMPDIR, a UTF-8 locale.

    Nothing else from the parent is passed on, so no token, key, database URL or
    cloud credential can reach the code under test.
    """
    return {
        "PATH": os.environ.get("PATH") or DEFAULT_PATH,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


@functools.cache
def network_isolation_available() -> bool:
    """Whether the whole sandbox works here, locks included (probed once per process).

    `run` needs no probe (the sandbox reports itself ready); this is for callers
    that want to know beforehand, such as tests choosing what to expect.
    """
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(
            [*_UNSHARE, sys.executable, "-I", "-S", str(_SANDBOX), "-1", "[]", "[]", "/bin/true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


Sandbox = Literal["auto", "required", "off"]


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str],
    sandbox: Sandbox,
    excerpt_bytes: int,
    hide: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    cancel: CancelToken | None = None,
    on_start: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
) -> RunOutcome:
    """Run `argv` in `cwd` with exactly `env`; kill its process group at `timeout_s`.

    `sandbox` ``required`` or ``auto`` runs the command in the sandbox
    (`verifier._sandbox`): the existing paths of `hide` are covered, and the file
    system is read-only but for `writable` (which must hold `cwd`). There is no
    separate probe: the sandbox says it is ready through a pipe just before it
    becomes the command, and a run whose sandbox never said so is, with
    ``auto``, run again without it (nothing of the command ran), and with
    ``required`` a `SandboxUnavailable`. Raises `RunnerNotFound` when `argv[0]`
    cannot be found or executed, and `Cancelled` when `cancel` is set first: the
    whole process group is killed either way. `on_start` is called once the
    command's process exists. `pass_fds` are descriptors the command inherits
    under the same numbers, through the sandbox too (a results pipe).
    """
    if not argv:
        raise ValueError("run() needs a non-empty argument list")
    search_path = env.get("PATH", DEFAULT_PATH)
    executable = _resolve(argv[0], cwd, search_path)
    unshare = shutil.which("unshare") if sandbox != "off" else None
    if unshare is None and sandbox == "required":
        raise SandboxUnavailable("network_isolation is 'required' but `unshare` is not installed")
    if unshare is not None:
        outcome = _run_once(
            argv, executable, cwd, timeout_s, env, excerpt_bytes, cancel, on_start,
            sandboxed=(unshare, _coverable(hide), [str(p) for p in writable]), pass_fds=pass_fds,
        )  # fmt: skip
        if outcome is not None:
            return outcome
        if sandbox == "required":
            raise SandboxUnavailable(
                "network_isolation is 'required' but the `unshare` sandbox does not work here"
            )
    outcome = _run_once(
        argv, executable, cwd, timeout_s, env, excerpt_bytes, cancel, on_start, sandboxed=None,
        pass_fds=pass_fds,
    )  # fmt: skip
    assert outcome is not None
    return outcome


def _run_once(
    argv: Sequence[str],
    executable: str,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str],
    excerpt_bytes: int,
    cancel: CancelToken | None,
    on_start: Callable[[], None] | None,
    sandboxed: tuple[str, tuple[str, ...], list[str]] | None,
    pass_fds: Sequence[int] = (),
) -> RunOutcome | None:
    """One run; None when the sandbox asked for did not come up (the command never ran)."""
    search_path = env.get("PATH", DEFAULT_PATH)
    launch = [executable, *argv[1:]]
    ready_r, ready_w = os.pipe()
    hidden: tuple[str, ...] = ()
    if sandboxed is not None:
        unshare, hidden, rw = sandboxed
        trampoline = [sys.executable, "-I", "-S", str(_SANDBOX), str(ready_w)]
        launch = [unshare, *_UNSHARE[1:], *trampoline, json.dumps(hidden), json.dumps(rw), *launch]

    log = _Log(excerpt_bytes)
    start = time.monotonic()
    deadline = start + timeout_s
    try:
        proc = subprocess.Popen(
            launch,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=((ready_w,) if sandboxed is not None else ()) + tuple(pass_fds),
        )
    except (FileNotFoundError, PermissionError) as exc:
        os.close(ready_r)
        os.close(ready_w)
        raise RunnerNotFound(argv[0], search_path, str(exc)) from None
    except OSError as exc:
        os.close(ready_r)
        os.close(ready_w)
        raise InfrastructureError(f"cannot start {argv[0]!r}: {exc}") from None
    os.close(ready_w)
    if on_start is not None:
        on_start()

    assert proc.stdout is not None
    timed_out = False
    try:
        timed_out = _pump(proc, log, deadline, cancel)
    finally:
        # Whatever happened, nothing of the group outlives the run.
        _kill_group(proc.pid)
        proc.wait()
        _drain(proc.stdout.fileno(), log, time.monotonic() + _DRAIN_S)
        proc.stdout.close()
        os.set_blocking(ready_r, False)
        try:
            ready = os.read(ready_r, 1) == b"1"
        except BlockingIOError:
            ready = False
        os.close(ready_r)
    duration = time.monotonic() - start

    exit_code = None if timed_out else proc.returncode
    if sandboxed is not None and not ready and not timed_out:
        return None
    if sandboxed is not None and exit_code == 127 and log.start.startswith(_EXEC_FAILED):
        detail = log.start.decode("utf-8", "replace").strip()
        raise RunnerNotFound(argv[0], search_path, detail)
    return RunOutcome(
        argv=tuple(argv),
        executable=executable,
        exit_code=exit_code,
        timed_out=timed_out,
        duration_s=duration,
        output_excerpt=log.excerpt(),
        output_sha256=log.sha256.hexdigest(),
        output_bytes=log.total,
        network_isolated=sandboxed is not None,
        hidden=hidden,
    )


def _coverable(paths: Sequence[Path]) -> tuple[str, ...]:
    """The existing paths, less those inside a folder that is covered already."""
    existing = [p for p in dict.fromkeys(paths) if p.exists()]
    folders = [p for p in existing if p.is_dir()]
    return tuple(
        str(p) for p in existing if not any(f != p and p.is_relative_to(f) for f in folders)
    )


def _resolve(binary: str, cwd: Path, search_path: str) -> str:
    """The absolute path of `binary`, looked up on the child's PATH before anything starts."""
    if "/" in binary:
        candidate = Path(binary) if os.path.isabs(binary) else cwd / binary
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise RunnerNotFound(binary, search_path, "not an executable file")
    found = shutil.which(binary, path=search_path)
    if found is None:
        raise RunnerNotFound(binary, search_path)
    return os.path.abspath(found)


def _pump(
    proc: subprocess.Popen[bytes], log: _Log, deadline: float, cancel: CancelToken | None
) -> bool:
    """Read output until the main process exits; True when the deadline came first.

    One `select` waits on the output, the process's exit (a pidfd) and the cancel
    token together: no polling sleep, and a cancel or an exit is seen at once.
    """
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    pidfd = os.pidfd_open(proc.pid)
    try:
        waiting = [out, pidfd] + ([cancel.fileno()] if cancel is not None else [])
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return proc.poll() is None
            ready, _, _ = select.select(waiting, [], [], remaining)
            if cancel is not None and cancel.is_set():
                raise Cancelled("the test run was cancelled")
            if out in ready:
                chunk = os.read(out, _READ_CHUNK)
                if chunk:
                    log.add(chunk)
                else:
                    waiting.remove(out)
            if pidfd in ready and proc.poll() is not None:
                return False
    finally:
        os.close(pidfd)


def _drain(fd: int, log: _Log, deadline: float) -> None:
    """Read what is left in the pipe, up to its end or `deadline`."""
    while (remaining := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            return
        log.add(chunk)


def _kill_group(pgid: int) -> None:
    # The group outlives its leader while a grandchild is in it, so the id stays reserved.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _Log:
    """The first and last bytes of a log, with the hash and size of all of it."""

    def __init__(self, excerpt_bytes: int) -> None:
        self.head_limit = max(excerpt_bytes, 0) // 2
        self.tail_limit = max(excerpt_bytes, 0) - self.head_limit
        self.start = b""  # the first bytes whatever the excerpt size, to recognise unshare
        self.head = b""
        self.tail = bytearray()
        self.sha256 = hashlib.sha256()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.sha256.update(chunk)
        self.total += len(chunk)
        if len(self.start) < 256:
            self.start += chunk[: 256 - len(self.start)]
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail += chunk
            del self.tail[: max(len(self.tail) - self.tail_limit, 0)]

    def excerpt(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        text = self.head.decode("utf-8", "replace")
        if omitted:
            text += f"\n[... {omitted} bytes omitted ...]\n"
        return text + bytes(self.tail).decode("utf-8", "replace")
