"""The sandbox's first process: build the root (unshare), apply the limits, become the command.

Run by `verifier._internal.sandbox.runner` as ``python -I -S -c SOURCE SPEC PROGRAM ARGS...`` (the
source of this file, so it needs no path of ours inside the sandbox), either
inside ``unshare -rm --pid --fork --kill-child --mount-proc`` (which gives it a
user namespace, its own PIDs and mounts: it builds the root itself), inside
``bwrap`` (which has built the root), or with no sandbox at all (limits only).
Standard library only: it runs before anything else, with no site packages.

SPEC is JSON: ``ready`` (a file descriptor, -1 none), ``cgroups`` (descriptors
of ``cgroup.procs`` files to join), ``rlimits`` ([name, value] pairs),
``root`` (null, or the mounts of the allow-list, in order: see
`verifier._internal.sandbox.jail.plan`) and ``cwd``. With a root:

1. make every mount private, so nothing we do reaches the host;
2. mount an empty tmpfs on /sys (a folder nothing of the run needs) and build
   the new root in it: read-only binds of the allowed paths, the writable run
   folder, a size-capped /tmp, a minimal /dev, /proc, covers over hidden paths;
3. make the binds read-only, pivot into the new root and drop the old one;
4. enter a new user and mount namespace, which locks every mount made above:
   the code under test, root in its namespace, can neither unmount a cover nor
   make a bind writable again.

Then, in every mode: join the cgroups, set the rlimits, write ``1`` and a JSON
account of the limits applied to READY and close it (so the runner knows the
sandbox stands), and exec PROGRAM. A failure before that prints
``verifier-sandbox: ...`` and exits 125 without writing to READY (127 when
PROGRAM cannot be found, 126 when it is no program).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 4096, 16384, 1 << 18
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 1
SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 alike (the generic syscall table)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
MNT_DETACH = 2
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
NEW_ROOT = "/sys"

libc = ctypes.CDLL(None, use_errno=True)


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def fail(what: str, status: int = 125) -> None:
    sys.stderr.write(f"verifier-sandbox: {what}: {os.strerror(ctypes.get_errno())}\n")
    sys.exit(status)


def _c(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    if libc.mount(_c(source), _c(target), _c(fstype), flags, _c(data)) != 0:
        fail(f"mount {target}")


def set_read_only(path: str, recursive: bool = True) -> None:
    attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    if libc.syscall(
        SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), flags, ctypes.byref(attr), ctypes.sizeof(attr)
    ):
        fail(f"cannot make {path} read-only")


def _target(path: str, directory: bool) -> str:
    """The mount point in the new root, made when missing (only on our own tmpfs)."""
    dest = NEW_ROOT + path
    if not os.path.lexists(dest):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if directory:
            os.mkdir(dest)
        else:
            open(dest, "w").close()
    return dest


def build_root(mounts: list[list[object]]) -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    read_only: list[str] = []
    for kind, path, source, size in mounts:
        assert isinstance(path, str) and isinstance(source, str) and isinstance(size, int)
        if kind in ("ro", "rw", "dev"):
            dest = _target(path, os.path.isdir(source))
            mount(source, dest, None, MS_BIND | MS_REC, None)
            if kind == "ro":
                read_only.append(dest)
        elif kind == "symlink":
            os.makedirs(os.path.dirname(NEW_ROOT + path), exist_ok=True)
            os.symlink(source, NEW_ROOT + path)
        elif kind == "tmpfs":
            mount("tmpfs", _target(path, True), "tmpfs", MS_NOSUID | MS_NODEV, f"size={size}")
        elif kind == "cover":
            dest = NEW_ROOT + path
            if os.path.isdir(dest):
                mount("none", dest, "tmpfs", MS_RDONLY, "size=4k,mode=0555")
            elif os.path.lexists(dest):
                mount("/dev/null", dest, None, MS_BIND, None)
        elif kind == "proc":
            mount("/proc", _target(path, True), None, MS_BIND | MS_REC, None)
    for dest in read_only:
        set_read_only(dest)
    os.chdir(NEW_ROOT)
    if SYS_PIVOT_ROOT is None or libc.syscall(SYS_PIVOT_ROOT, b".", b".") != 0:
        fail("cannot pivot into the new root")
    if libc.umount2(b".", MNT_DETACH) != 0:
        fail("cannot drop the host's root")
    os.chdir("/")
    set_read_only("/", recursive=False)
    # Lock: mounts copied into a namespace of a new user namespace cannot be undone.
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        fail("cannot lock the mounts")
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{gid} {gid} 1")


def apply_limits(cgroups: list[int], rlimits: list[list[object]]) -> dict[str, object]:
    """Join the cgroups and lower the rlimits; what really took, for the verdict."""
    joined, applied, failed = [], {}, {}
    for fd in cgroups:
        try:
            os.write(fd, b"0")
            joined.append(fd)
        except OSError as exc:
            failed[f"cgroup fd {fd}"] = exc.strerror
        os.close(fd)
    for name, value in rlimits:
        assert isinstance(name, str) and isinstance(value, int)
        which = getattr(resource, name)
        try:
            _, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))
            applied[name] = value
        except (OSError, ValueError) as exc:
            failed[name] = str(exc)
    return {"cgroups": joined, "rlimits": applied, "failed": failed}


def main(argv: list[str]) -> None:
    spec = json.loads(argv[1])
    program = argv[2:]
    if spec["root"] is not None:
        build_root(spec["root"])
    if spec["cwd"]:
        os.chdir(spec["cwd"])
    report = apply_limits(spec["cgroups"], spec["rlimits"])
    ready = spec["ready"]
    if ready >= 0:
        os.write(ready, b"1" + json.dumps(report).encode())
        os.close(ready)
    try:
        os.execv(program[0], program)
    except (FileNotFoundError, PermissionError) as exc:
        sys.stderr.write(f"verifier-sandbox: cannot execute {program[0]}: {exc}\n")
        sys.exit(127)
    except OSError as exc:  # not a program the kernel can run (no ELF, no #!)
        sys.stderr.write(f"verifier-sandbox: cannot start {program[0]}: {exc}\n")
        sys.exit(126)


if __name__ == "__main__":
    main(sys.argv)
