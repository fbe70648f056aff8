"""The sandbox's first process: cover, lock, then become the command.

Run by `verifier.runner` as ``python -I -S _sandbox.py READY HIDE WRITABLE PROGRAM ARGS...``
inside ``unshare -rnm --pid --fork --kill-child --mount-proc`` (a user namespace
with no network, its own PIDs and its own mounts). Standard library only: it
runs before anything else, with no site packages.

1. make every mount private, so nothing we do reaches the host;
2. cover each path of HIDE (JSON list): an empty read-only tmpfs over a folder,
   /dev/null over a file; /run too, where the host's Unix sockets live;
3. make the whole tree read-only, recursively, except the paths of WRITABLE
   (the run's own folder) and /proc;
4. enter a new user and mount namespace, which locks every mount made above:
   the code under test, root in its namespace, can neither unmount a cover
   nor make the host writable again;
5. write ``1`` to the file descriptor READY (-1: none) and close it, so the
   runner knows the sandbox stands, then exec PROGRAM.

A failure prints ``verifier-sandbox: ...`` and exits 125 without writing to
READY (127 when PROGRAM cannot be executed), which the runner turns into a run
without the sandbox (``auto``) or an error (``required``), never a verdict.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

MS_RDONLY, MS_BIND, MS_REC, MS_PRIVATE = 1, 4096, 16384, 1 << 18
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 1
SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 alike (the generic syscall table)
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000

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
        fail(f"cannot hide {target}" if source in ("none", "/dev/null") else f"mount {target}")


def set_read_only(path: str, read_only: bool) -> None:
    attr = (
        MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
        if read_only
        else MountAttr(0, MOUNT_ATTR_RDONLY, 0, 0)
    )
    size = ctypes.sizeof(attr)
    if libc.syscall(
        SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE, ctypes.byref(attr), size
    ):
        fail(f"cannot make {path} {'read-only' if read_only else 'writable'}")


def main(argv: list[str]) -> None:
    ready, hide, writable = int(argv[1]), json.loads(argv[2]), json.loads(argv[3])
    program = argv[4:]
    # 1. Private mounts.
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    # 2. Covers.
    for path in [*hide, "/run"]:
        if os.path.isdir(path):
            mount("none", path, "tmpfs", MS_RDONLY, "size=4k,mode=0555")
        elif os.path.exists(path):
            mount("/dev/null", path, None, MS_BIND, None)
    for path in writable:
        mount(path, path, None, MS_BIND | MS_REC, None)
    # 3. Read-only everywhere but the run's folder and /proc.
    set_read_only("/", True)
    for path in [*writable, "/proc"]:
        set_read_only(path, False)
    # 4. Lock: mounts copied into a namespace of a new user namespace cannot be undone.
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        fail("cannot lock the mounts")
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{gid} {gid} 1")
    # Our working folder was entered before the writable bind mount over it, so it
    # still refers to the read-only mount below: enter it again, through the bind.
    os.chdir(os.getcwd())
    # 5. Say the sandbox stands, then become the command.
    if ready >= 0:
        os.write(ready, b"1")
        os.close(ready)
    try:
        os.execv(program[0], program)
    except OSError as exc:
        sys.stderr.write(f"verifier-sandbox: cannot execute {program[0]}: {exc}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv)
