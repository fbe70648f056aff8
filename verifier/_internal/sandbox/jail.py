"""The sandbox's allow-list and limits, built the same way for bubblewrap and for unshare.

`plan` lists what the root of a sandboxed run holds: an empty tmpfs with, in
order, the system folders read-only (``/usr``, the ``/bin``-like links or
folders, ``/etc`` less its secrets), the toolchain's install prefix and the
operator's read-only paths, the run's own folder writable, a size-capped
``/tmp`` and ``/dev/shm``, a minimal ``/dev``, ``/proc``, and covers over the
paths to hide that lie inside what was bound. Nothing else of the host exists
there: not ``/home``, ``/root``, the host ``/tmp``, ``/run``, ``/var``, ``/srv``.
`bwrap_args` turns the plan into bubblewrap options; `verifier._internal.sandbox.child`
builds it itself under ``unshare``. `Cgroups` makes a run's own cgroup where
the host lets us (v2, else v1), for memory and process counts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from verifier.config import SandboxLimits

__all__ = ["Cgroups", "Mount", "bwrap_args", "plan", "rlimits", "toolchain_roots"]

Mount = tuple[str, str, str, int]  # kind, path in the sandbox, source, size in bytes

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Under /etc, what the code under test has no business reading (readable to root).
ETC_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/verifier",
    "/etc/security/opasswd",
)
DEVICES = ("null", "zero", "full", "random", "urandom")
# Folders never bound as a toolchain's prefix: binding one would bind the host.
_TOO_BROAD = ("/", "/home", "/root", "/tmp", "/var", "/srv", "/run", "/opt", "/mnt", "/media")


def toolchain_roots(executable: str) -> list[str]:
    """The install prefixes a program needs: of its path, of its real path, of its ``#!``.

    ``.../bin/node`` needs ``...`` (its ``lib/``), a venv's ``bin/python``
    needs the venv and, through its link, the base interpreter; pyenv's
    ``shims/python`` needs pyenv's folder. A prefix that is
    a home folder or a top-level folder is narrowed to the program's own folder.
    The verifier's interpreter brings ``sys.prefix`` and ``sys.base_prefix``.
    """
    paths = [executable, os.path.realpath(executable)]
    with contextlib.suppress(OSError), open(executable, "rb") as fh:
        first = fh.readline(256)
        if first.startswith(b"#!"):
            words = first[2:].decode("utf-8", "replace").split()
            if words and words[0].startswith("/"):
                paths += [words[0], os.path.realpath(words[0])]
    if os.path.realpath(executable) == os.path.realpath(sys.executable):
        paths += [os.path.join(sys.prefix, "bin", "python"), sys.base_prefix + "/bin/python"]
    roots: list[str] = []
    home = os.path.expanduser("~")
    for path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        root = os.path.dirname(folder)  # bin/'s parent; pyenv's shims/ too
        broad = root in _TOO_BROAD or root == home or home.startswith(root.rstrip("/") + "/")
        roots.append(folder if broad else root)
    return list(dict.fromkeys(roots))


def _inside(path: str, folders: Sequence[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def plan(
    *,
    read_only: Sequence[str],
    writable: Sequence[str],
    hide: Sequence[str],
    tmp_bytes: int,
) -> list[Mount]:
    """The mounts of the sandbox's root, parents before children."""
    mounts: list[Mount] = []
    bound: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            mounts.append(("symlink", path, os.readlink(path), 0))
        elif os.path.isdir(path):
            mounts.append(("ro", path, path, 0))
            bound.append(path)
    mounts.append(("tmpfs", "/tmp", "", tmp_bytes))
    mounts.append(("tmpfs", "/dev", "", 65536))
    mounts += [("dev", f"/dev/{name}", f"/dev/{name}", 0) for name in DEVICES]
    mounts += [
        ("symlink", "/dev/fd", "/proc/self/fd", 0),
        ("symlink", "/dev/stdin", "/proc/self/fd/0", 0),
        ("symlink", "/dev/stdout", "/proc/self/fd/1", 0),
        ("symlink", "/dev/stderr", "/proc/self/fd/2", 0),
        ("tmpfs", "/dev/shm", "", tmp_bytes),
        ("proc", "/proc", "/proc", 0),
    ]
    # After /tmp's tmpfs (a venv or the run's folder may lie in the host's /tmp), parents first.
    extra = {os.path.abspath(p): "ro" for p in read_only if os.path.exists(p)}
    extra |= {os.path.abspath(p): "rw" for p in writable}
    for path, kind in sorted(extra.items(), key=lambda item: len(item[0])):
        if kind == "rw" or not _inside(path, bound):
            mounts.append((kind, path, path, 0))
            bound.append(path)
    for path in [*ETC_SECRETS, *hide]:
        if os.path.lexists(path) and _inside(path, bound):
            mounts.append(("cover", path, "", 0))
    return mounts


def bwrap_args(mounts: Sequence[Mount], cwd: str) -> list[str]:
    """bubblewrap's options for the plan: new namespaces for everything, no network."""
    args = [
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--disable-userns",
    ]
    for kind, path, source, size in mounts:
        if kind == "ro":
            args += ["--ro-bind", source, path]
        elif kind == "rw":
            args += ["--bind", source, path]
        elif kind == "dev":
            args += ["--dev-bind", source, path]
        elif kind == "symlink":
            args += ["--symlink", source, path]
        elif kind == "tmpfs":
            args += ["--size", str(size), "--tmpfs", path]
        elif kind == "proc":
            args += ["--proc", path]
        elif kind == "cover":
            if os.path.isdir(path):
                args += ["--tmpfs", path, "--remount-ro", path]
            else:
                args += ["--ro-bind", "/dev/null", path]
    return [*args, "--remount-ro", "/", "--chdir", cwd]


def rlimits(limits: SandboxLimits) -> list[tuple[str, int, str]]:
    """The rlimits for `limits`: (resource name, value, the limit it serves)."""
    mb = 1024 * 1024
    out = [
        # RLIMIT_DATA, not RLIMIT_AS: runtimes (V8, Go, the JVM) reserve far more address
        # space than they ever use; the data limit counts what is writable.
        ("RLIMIT_DATA", limits.memory_mb * mb, "memory_mb"),
        ("RLIMIT_NOFILE", limits.open_files, "open_files"),
        ("RLIMIT_FSIZE", limits.file_size_mb * mb, "file_size_mb"),
        ("RLIMIT_CPU", limits.cpu_s, "cpu_s"),
    ]
    if os.getuid() != 0:
        # Counts every process of our user, and never binds root: a backstop only.
        out.append(("RLIMIT_NPROC", limits.processes, "processes"))
    return out


class Cgroups:
    """A cgroup of the run's own for memory and process counts, where the host allows it.

    cgroup v2 when our cgroup there offers the controller, else the v1
    hierarchy of that controller; nothing when neither can be written (a user
    without delegation). The child joins through the ``cgroup.procs``
    descriptors (`fds`) before it becomes the command; `close` removes the
    cgroups once the run is over.
    """

    ROOT = Path("/sys/fs/cgroup")

    def __init__(self, limits: SandboxLimits) -> None:
        self.made: list[Path] = []
        self.fds: list[int] = []
        self.applied: dict[str, str] = {}  # limit name -> what enforces it
        self.problems: dict[str, str] = {}
        wanted = {"memory": limits.memory_mb * 1024 * 1024, "pids": limits.processes}
        for controller, value in wanted.items():
            name = "memory_mb" if controller == "memory" else "processes"
            try:
                how = self._make(controller, value)
            except OSError as exc:
                self.problems[name] = f"cgroup {controller}: {exc.strerror or exc}"
                continue
            if how:
                self.applied[name] = how
        self.joinable = len(self.fds)  # how many the child must report joined

    def _make(self, controller: str, value: int) -> str | None:
        unified = self.ROOT / "cgroup.controllers"
        if unified.is_file() and controller in unified.read_text().split():
            parent = self.ROOT / _own_cgroup("")
            if controller in (parent / "cgroup.subtree_control").read_text().split():
                knob = "memory.max" if controller == "memory" else "pids.max"
                return self._join(parent, knob, value, f"cgroup v2 {knob}")
        v1 = self.ROOT / controller
        if (v1 / "cgroup.procs").is_file() and not (v1 / "cgroup.controllers").exists():
            knob = "memory.limit_in_bytes" if controller == "memory" else "pids.max"
            return self._join(v1 / _own_cgroup(controller), knob, value, f"cgroup v1 {knob}")
        return None

    def _join(self, parent: Path, knob: str, value: int, how: str) -> str:
        group = parent / f"verifier-run-{uuid.uuid4().hex[:12]}"
        group.mkdir()
        self.made.append(group)
        (group / knob).write_text(str(value))
        self.fds.append(os.open(group / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        return how

    def close_fds(self) -> None:
        """Close our copies of the descriptors (once the child holds its own)."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []

    def close(self) -> None:
        self.close_fds()
        for group in self.made:
            # The run's processes are dead, but may not have left the cgroup yet.
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        self.made = []


def _own_cgroup(controller: str) -> str:
    """Our cgroup's path in the hierarchy of `controller` ("" for v2), relative."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller and controller in names.split(",")) or (not controller and not names):
            return path.lstrip("/")
    raise FileNotFoundError(f"no {controller or 'v2'} cgroup in /proc/self/cgroup")
