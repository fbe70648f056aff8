"""Run one command the way the verifier runs anything it does not trust.

An argument list, never a shell; an explicit `cwd`; a minimal environment with
no secrets (`minimal_env`); stdin closed; a timeout after which the whole
process group is killed; limits on memory, processes, open files, file size and
CPU time (`verifier._internal.sandbox.jail`: a cgroup of the run's own where the host allows,
rlimits); and a sandbox built by allow-list: an empty root holding only the
system folders and the toolchain read-only, the operator's read-only paths, the
run's own folder writable, a private size-capped /tmp, a minimal /dev and
/proc, in namespaces of its own (user, PID, mount, network: no network at
all). bubblewrap builds it when installed; else our own trampoline under
`unshare` (`verifier._internal.sandbox.child`). The output is read as it comes, so a chatty
process cannot block on a full pipe, and kept as a bounded excerpt (head and
tail, terminal control characters removed) beside the SHA-256 and size of the
whole log.
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from verifier._internal.cancel import CancelToken
from verifier._internal.sandbox import jail as _jail
from verifier.config import SandboxLimits
from verifier.controls import strip_controls
from verifier.errors import Cancelled, InfrastructureError

__all__ = [
    "RunOutcome",
    "RunnerNotFound",
    "SandboxUnavailable",
    "kill_all",
    "minimal_env",
    "network_isolation_available",
    "run",
]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_UNSHARE = ("unshare", "-rnm", "--pid", "--fork", "--kill-child", "--mount-proc", "--")
# Our trampoline reports a missing program so (status 127), and a non-program (126).
_EXEC_FAILED = b"verifier-sandbox: cannot execute"
_START_FAILED = b"verifier-sandbox: cannot start"
_SANDBOX = Path(__file__).with_name("child.py")
_READ_CHUNK = 65536
# After the main process has gone, how long we wait for the pipe to close.
_DRAIN_S = 2.0


class SandboxUnavailable(InfrastructureError):
    """The sandbox was required and could not be set up on this machine."""

    code = "sandbox_unavailable"


class RunnerNotFound(InfrastructureError):
    """The program to run does not exist (or cannot be executed) on this machine."""

    code = "runner_not_found"

    def __init__(self, binary: str, search_path: str, detail: str = "") -> None:
        self.binary = binary
        self.search_path = search_path
        message = f"cannot find executable {binary!r} (PATH searched: {search_path!r})"
        super().__init__(f"{message}: {detail}" if detail else message)


@dataclass(frozen=True)
class RunOutcome:
    """What a run did. `exit_code` is None when the run was killed at its timeout.

    `sandbox` names the sandbox the command ran in ("bwrap", "unshare", "none");
    `limits` maps each limit to its value and what enforced it (an empty list:
    not applied, named in `limits_not_applied`); `notes` say why a sandbox
    was passed over.
    """

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
    sandbox: str = "none"
    limits: Mapping[str, Any] = field(default_factory=dict)
    limits_not_applied: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # Killed by `kill_all` (the verifier stopping), not by its timeout or its own doing.
    stopped: bool = False


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
def _trampoline() -> str:
    """The trampoline's source, passed with ``-c``: no path of ours need exist in the sandbox."""
    return _SANDBOX.read_text(encoding="utf-8")


def _sandboxes(*, fallback_only: bool = False) -> list[tuple[str, str]]:
    """The sandboxes installed here, preferred first: (name, program)."""
    found = [] if fallback_only else [("bwrap", shutil.which("bwrap"))]
    found.append(("unshare", shutil.which("unshare")))
    return [(name, path) for name, path in found if path is not None]


@functools.cache
def network_isolation_available() -> bool:
    """Whether a sandbox works here, root and locks included (probed once per process).

    `run` needs no probe (the sandbox reports itself ready); this is for callers
    that want to know beforehand, such as tests choosing what to expect.
    """
    return bool(sandboxes_available())


def sandboxes_available() -> tuple[str, ...]:
    """The sandboxes that really start here, by a run of ``true`` in each (not cached)."""
    working = []
    for name, _ in _sandboxes():
        try:
            outcome = run(
                ["/bin/true"], cwd=Path("/"), timeout_s=10, env={"PATH": DEFAULT_PATH},
                sandbox="required", excerpt_bytes=0, only=name,
            )  # fmt: skip
        except InfrastructureError:
            continue
        if outcome.exit_code == 0 and outcome.sandbox == name:
            working.append(name)
    return tuple(working)


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
    read_only: Sequence[Path] = (),
    limits: SandboxLimits | None = None,
    only: str | None = None,
    pass_fds: Sequence[int] = (),
) -> RunOutcome:
    """Run `argv` in `cwd` with exactly `env`; kill its process group at `timeout_s`.

    `sandbox` ``required`` or ``auto`` runs the command in the allow-list
    sandbox: bubblewrap, else `unshare` (``only`` names one, for tests). It
    shows the system folders, the toolchain of `argv[0]` and `read_only`
    read-only, and `writable` (which must hold `cwd`) writable; the existing
    paths of `hide` that lie inside those are covered. There is no separate
    probe: the sandbox says it is ready through a pipe just before it becomes
    the command, and a run whose sandbox never said so (nothing of the command
    ran) is tried in the next sandbox, then, with ``auto``, without one (with a
    note); with ``required`` it is a `SandboxUnavailable`. `limits` (the
    defaults of `SandboxLimits` when None) apply in every case. Raises
    `RunnerNotFound` when `argv[0]` cannot be found or executed, and
    `Cancelled` when `cancel` is set first: the whole process group is killed
    either way. `on_start` is called once the command's process exists.
    `pass_fds` are descriptors the command inherits under the same numbers,
    through the sandbox too (a results pipe).
    """
    if not argv:
        raise ValueError("run() needs a non-empty argument list")
    search_path = env.get("PATH", DEFAULT_PATH)
    executable = _resolve(argv[0], cwd, search_path)
    limits = limits or SandboxLimits()
    candidates = [] if sandbox == "off" else _sandboxes()
    if only is not None:
        candidates = [c for c in candidates if c[0] == only]
    if not candidates and sandbox == "required":
        raise SandboxUnavailable(
            "network_isolation is 'required' but neither `bwrap` nor `unshare` is installed"
        )
    notes: list[str] = []
    if candidates:
        allowed = [
            *_jail.toolchain_roots(executable),
            *_jail.toolchain_roots(sys.executable),  # the trampoline's interpreter
            *(str(p) for p in read_only),
        ]
        if cwd != Path("/") and not any(cwd == w or cwd.is_relative_to(w) for w in writable):
            allowed.append(str(cwd))  # the command starts there: shown, read-only
        hidden = _coverable(hide)
        mounts = _jail.plan(
            read_only=allowed,
            writable=[str(p) for p in writable],
            hide=hidden,
            tmp_bytes=limits.tmp_mb * 1024 * 1024,
        )
    for name, program in candidates:
        outcome = _run_once(
            argv, executable, cwd, timeout_s, env, excerpt_bytes, cancel, on_start, limits,
            sandboxed=(name, program, mounts, hidden), pass_fds=pass_fds,
        )  # fmt: skip
        if outcome.sandbox != "failed":
            return replace(outcome, notes=tuple(notes))
        notes.append(f"the {name} sandbox did not start: {outcome.output_excerpt.strip()[:300]}")
    if candidates and sandbox == "required":
        raise SandboxUnavailable(
            "network_isolation is 'required' but no sandbox works here: " + "; ".join(notes)
        )
    if candidates:
        notes.append("the command ran without a sandbox")
    outcome = _run_once(
        argv, executable, cwd, timeout_s, env, excerpt_bytes, cancel, on_start, limits,
        sandboxed=None, pass_fds=pass_fds,
    )  # fmt: skip
    return replace(outcome, notes=tuple(notes))


def _run_once(
    argv: Sequence[str],
    executable: str,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str],
    excerpt_bytes: int,
    cancel: CancelToken | None,
    on_start: Callable[[], None] | None,
    limits: SandboxLimits,
    sandboxed: tuple[str, str, list[_jail.Mount], tuple[str, ...]] | None,
    pass_fds: Sequence[int] = (),
) -> RunOutcome:
    """One run. When the sandbox asked for did not come up (the command never ran), the
    outcome has ``sandbox="failed"``, no exit code, and the sandbox's words as excerpt."""
    search_path = env.get("PATH", DEFAULT_PATH)
    ready_r, ready_w = os.pipe()
    cgroups = _jail.Cgroups(limits)
    rlimits = _jail.rlimits(limits)
    name = "none" if sandboxed is None else sandboxed[0]
    spec: dict[str, Any] = {
        "ready": ready_w,
        "cgroups": cgroups.fds,
        "rlimits": [[r, value] for r, value, _ in rlimits],
        "root": None,
        "cwd": str(cwd),
    }
    trampoline = [sys.executable, "-I", "-S", "-c", _trampoline()]
    hidden: tuple[str, ...] = ()
    if sandboxed is None:
        launch = [*trampoline, json.dumps(spec), executable, *argv[1:]]
    else:
        _, program, mounts, hidden = sandboxed
        if name == "bwrap":
            outer = [program, *_jail.bwrap_args(mounts, str(cwd)), "--"]
        else:
            outer = [program, *_UNSHARE[1:]]
            spec["root"] = mounts
        launch = [*outer, *trampoline, json.dumps(spec), executable, *argv[1:]]

    log = _Log(excerpt_bytes)
    start = time.monotonic()
    deadline = start + timeout_s
    try:
        try:
            proc = subprocess.Popen(
                launch,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(ready_w, *cgroups.fds, *pass_fds),
            )
        except OSError as exc:
            os.close(ready_r)
            raise InfrastructureError(f"cannot start {launch[0]!r}: {exc}") from None
        finally:
            os.close(ready_w)
            cgroups.close_fds()
        _LIVE_GROUPS.add(proc.pid)
        if on_start is not None:
            on_start()

        assert proc.stdout is not None
        timed_out = False
        try:
            timed_out = _pump(proc, log, deadline, cancel)
        finally:
            # Whatever happened, nothing of the group outlives the run.
            _kill_group(proc.pid)
            _LIVE_GROUPS.discard(proc.pid)
            proc.wait()
            stopped = proc.pid in _STOPPED
            _STOPPED.discard(proc.pid)
            _drain(proc.stdout.fileno(), log, time.monotonic() + _DRAIN_S)
            proc.stdout.close()
            report = _read_ready(ready_r)
    finally:
        cgroups.close()
    duration = time.monotonic() - start

    exit_code = None if timed_out else proc.returncode
    if stopped and report is None:
        # `kill_all` came before the command was started: it was stopped, it did not fail to start.
        return RunOutcome(
            argv=tuple(argv), executable=executable, exit_code=exit_code, timed_out=False,
            duration_s=duration, output_excerpt=log.excerpt(), output_sha256=log.sha256.hexdigest(),
            output_bytes=log.total, network_isolated=sandboxed is not None, hidden=hidden,
            sandbox=name, stopped=True,
        )  # fmt: skip
    if report is None and not timed_out:
        if sandboxed is not None:
            return RunOutcome(
                argv=tuple(argv), executable=executable, exit_code=None, timed_out=False,
                duration_s=duration, output_excerpt=log.excerpt(), output_sha256="",
                output_bytes=log.total, network_isolated=False, sandbox="failed",
                stopped=stopped,
            )  # fmt: skip
        detail = log.start.decode("utf-8", "replace").strip()
        raise InfrastructureError(f"cannot start {argv[0]!r}: {detail}")
    if exit_code == 126 and log.start.startswith(_START_FAILED):
        detail = log.start.decode("utf-8", "replace").strip()
        raise InfrastructureError(f"cannot start {argv[0]!r}: {detail}")
    if exit_code == 127 and log.start.startswith(_EXEC_FAILED):
        detail = log.start.decode("utf-8", "replace").strip()
        if sandboxed is not None:
            detail += " (in the sandbox: add its install folder to sandbox_read_only)"
        raise RunnerNotFound(argv[0], search_path, detail)
    in_force, not_applied = _limits_in_force(limits, cgroups, rlimits, report)
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
        sandbox=name,
        limits=in_force,
        limits_not_applied=not_applied,
        stopped=stopped,
    )


def _read_ready(fd: int) -> dict[str, Any] | None:
    """The trampoline's account of the limits, None when it never said it was ready."""
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            data += chunk
    os.close(fd)
    if not data.startswith(b"1"):
        return None
    try:
        report = json.loads(data[1:])
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}


def _limits_in_force(
    limits: SandboxLimits,
    cgroups: _jail.Cgroups,
    rlimits: Sequence[tuple[str, int, str]],
    report: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Each limit, its value and what enforced it; and the names of those nothing enforced."""
    report = report or {}
    joined = len(report.get("cgroups", ())) == cgroups.joinable
    applied = report.get("rlimits", {})
    out: dict[str, Any] = {}
    for limit in ("memory_mb", "processes", "open_files", "file_size_mb", "cpu_s"):
        by: list[str] = []
        if joined and limit in cgroups.applied:
            by.append(cgroups.applied[limit])
        by += [f"{r} (per process)" for r, _, serves in rlimits if serves == limit and r in applied]
        out[limit] = {"value": getattr(limits, limit), "enforced_by": by}
        if limit in cgroups.problems:
            out[limit]["problem"] = cgroups.problems[limit]
    out["tmp_mb"] = {"value": limits.tmp_mb, "enforced_by": ["tmpfs size"]}
    return out, tuple(k for k, v in out.items() if not v["enforced_by"])


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


# The process groups of the runs under way in this process: `kill_all` ends them when
# the verifier must stop at once (a second signal) and no `finally` will run.
_LIVE_GROUPS: set[int] = set()
# The groups `kill_all` killed: their runs were stopped by us, not by what they ran.
_STOPPED: set[int] = set()


def kill_all() -> None:
    """Kill every run under way, at once; for a process about to exit without unwinding.

    The outcome of each run killed here says so (`RunOutcome.stopped`): what it did
    says nothing about the code under test, and must not be kept (the test result cache).
    """
    for pgid in list(_LIVE_GROUPS):
        _STOPPED.add(pgid)
        _kill_group(pgid)


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
        """The head and tail as text, with no terminal control sequence (they would reach
        the terminal of whoever reads the verdict, or steer what it shows)."""
        omitted = self.total - len(self.head) - len(self.tail)
        text = strip_controls(self.head.decode("utf-8", "replace"))
        if omitted:
            text += f"\n[... {omitted} bytes omitted ...]\n"
        return text + strip_controls(bytes(self.tail).decode("utf-8", "replace"))
