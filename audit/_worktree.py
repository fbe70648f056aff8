"""The working tree as git would see it: which files, their stored bytes' SHA-256, their mode.

Plumbing of the recorder, not a public API. The rules are the contract's (and
the verifier's, `verifier/_internal/paths.py` and `verifier/_internal/repository.py`): only files
git would see count (tracked, or untracked and not ignored); a file's hash is
of the bytes git would store, its raw bytes unless a ``text`` or ``eol``
attribute asks for git's built-in CRLF-to-LF conversion (``text=auto``: only
for a file that is not binary, and never for one whose base blob holds a CR);
no filter program is run and ``core.autocrlf`` is not read. Symbolic links are
not files here: they never appear in effects, as in the reference harness.

A whole-tree snapshot (a command's effects) hashes every file twice a call; a
`HashCache` keeps the hashes of files that did not change since, under git's
own "racy" rule, so only what changed is read again.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from audit.errors import AuditError

EOL_TEXT = "text"
EOL_AUTO = "auto"

# Bytes git's ``gather_stats`` counts as non-printable: controls other than BS, TAB,
# LF, FF, CR, ESC, and DEL.
_NONPRINTABLE = bytes([*(b for b in range(32) if b not in (8, 9, 10, 12, 13, 27)), 127])
_GIT_TIMEOUT_S = 120


class PathOutsideRoot(AuditError, ValueError):
    """A path that is not a relative path inside the repository."""

    code = "path_outside_root"


class Seen(NamedTuple):
    """A file as git would store it: SHA-256 of those bytes and its git mode.

    A named tuple, not a dataclass: `dataclasses` imports `inspect` (and `ast`, `dis`,
    `tokenize`), about 13 ms of every gemini-cli hook process (docs/benchmarks.md).
    """

    sha256: str
    mode: str


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run git plumbing in `root`: an argument list, a timeout, no inherited ``GIT_*``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    done = subprocess.run(
        ["git", "-c", "core.quotepath=false", *args],
        cwd=root,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=_GIT_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        problem = done.stderr.decode("utf-8", "replace").strip()
        raise OSError(f"git {args[0]} failed in {str(root)!r}: {problem}")
    return done.stdout


def relative(root: Path, path: str) -> str:
    """`path` (a file or a folder) as git names it under `root`; `PathOutsideRoot` when it
    leaves the root.

    Refused: an empty path, NUL, an absolute path, a path whose ``..`` climbs
    out, and a path reached through a folder that is a link leading outside.
    """
    if not path or "\x00" in path:
        raise PathOutsideRoot(f"{path!r} is not a path")
    if path.startswith("/") or "\\" in path:
        raise PathOutsideRoot(f"{path!r} is not a relative POSIX path")
    rel = posixpath.normpath(path)  # "." is the root itself: a folder tool's whole tree
    if rel == ".." or rel.startswith("../"):
        raise PathOutsideRoot(f"{path!r} is outside the repository")
    if rel == ".":
        return rel
    if not (root / rel).parent.resolve().is_relative_to(root.resolve()):
        raise PathOutsideRoot(f"{path!r} is reached through a link leading outside the repository")
    if rel == ".git" or rel.startswith(".git/"):
        raise PathOutsideRoot(f"{path!r} is inside .git")
    return rel


class HashCache:
    """Hashes kept across snapshots, by what ``lstat`` says of a file, as git's index does.

    A hash is reused only when the file's inode, size, mode, mtime and ctime
    are those it was hashed with, and only when its ctime was over
    `RACY_NS` older than the moment it was hashed: a file written in the same
    tick of the file system's clock as it was hashed could change again
    without its times changing ("racy git"), so it is hashed again each time.
    ctime cannot be set by a program (``touch -d`` sets mtime only).
    """

    RACY_NS = 2_000_000_000

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        self._kept: dict[tuple[str, str | None], tuple[tuple[int, ...], Seen]] = {}

    def get(self, rel: str, eol: str | None, key: tuple[int, ...]) -> Seen | None:
        kept = self._kept.get((rel, eol))
        return kept[1] if kept is not None and kept[0] == key else None

    def put(self, rel: str, eol: str | None, key: tuple[int, ...], seen: Seen, at: int) -> None:
        if key[-1] < at - self.RACY_NS:
            self._kept[(rel, eol)] = (key, seen)
        else:
            self._kept.pop((rel, eol), None)

    def now(self) -> int:
        return self._clock()

    def dump(self) -> list[list[Any]]:
        """The hashes kept, as JSON: a process started per event hands them to the next."""
        return [
            [rel, eol, list(key), seen.sha256, seen.mode]
            for (rel, eol), (key, seen) in self._kept.items()
        ]

    def load(self, rows: Iterable[Sequence[Any]]) -> None:
        """Keep the hashes `dump` gave (a row that is not one is left out)."""
        for row in rows:
            try:
                rel, eol, key, sha256, mode = row
                self._kept[(str(rel), eol)] = (tuple(int(k) for k in key), Seen(sha256, mode))
            except (TypeError, ValueError):
                continue


def snapshot(
    root: Path,
    base_commit: str,
    paths: Iterable[str] | None = None,
    cache: HashCache | None = None,
) -> dict[str, Seen]:
    """Every file git would see (or only those of `paths`, already `relative`), hashed."""
    args = ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    if paths is not None:
        wanted = sorted(set(paths))
        if not wanted:
            return {}
        args += ["--", *(f":(literal){p}" for p in wanted)]
    listed = git(root, *args)
    visible = sorted({p.decode("utf-8", "surrogateescape") for p in listed.split(b"\0") if p})
    conversions = _Conversions(root, visible, whole=paths is None)
    real_root = root.resolve()
    inside: dict[str, bool] = {}  # per folder: reached without leaving the root
    result: dict[str, Seen] = {}
    for rel in visible:
        folder = posixpath.dirname(rel)
        if folder not in inside:
            inside[folder] = (root / folder).resolve().is_relative_to(real_root)
        if not inside[folder]:
            continue
        seen = _hash(root, rel, conversions.get, base_commit, cache)
        if seen is not None:
            result[rel] = seen
    return result


class _Conversions:
    """The line-ending conversions of a snapshot's paths (`_eol_conversions`), asked of
    git the first time a path's is needed: a file with no CRLF needs none, so a snapshot
    of a few such files (a file tool's call) runs one git process less."""

    def __init__(self, root: Path, paths: list[str], *, whole: bool) -> None:
        self._args = (root, paths, whole)
        self._got: dict[str, str] | None = None

    def get(self, rel: str) -> str | None:
        if self._got is None:
            root, paths, whole = self._args
            self._got = _eol_conversions(root, paths, whole=whole)
        return self._got.get(rel)


def _eol_conversions(root: Path, paths: list[str], *, whole: bool) -> dict[str, str]:
    """The conversion git's ``text``/``eol`` attributes ask for each path that has one.

    For the `whole` tree, git is asked only when the repository has attributes
    (almost none has); for a few paths, always (their ``.gitattributes`` are
    not among them).
    """
    if not paths:
        return {}
    if whole:
        info = Path(os.fsdecode(git(root, "rev-parse", "--git-path", "info/attributes").strip()))
        has_attributes = any(p == ".gitattributes" or p.endswith("/.gitattributes") for p in paths)
        if not (has_attributes or (root / info).exists()):
            return {}
    listing = "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
    fields = git(root, "check-attr", "--stdin", "-z", "text", "eol", stdin=listing).split(b"\0")
    attrs: dict[str, dict[str, str]] = {}
    for at in range(0, len(fields) - 2, 3):
        path, name, value = (f.decode("utf-8", "surrogateescape") for f in fields[at : at + 3])
        attrs.setdefault(path, {})[name] = value
    conversions: dict[str, str] = {}
    for path, values in attrs.items():
        text, eol = values.get("text", "unspecified"), values.get("eol", "unspecified")
        if text == "unset":
            continue
        if text == "auto":
            conversions[path] = EOL_AUTO
        elif text in ("set", "input") or eol in ("lf", "crlf"):
            conversions[path] = EOL_TEXT
    return conversions


def _hash(
    root: Path,
    rel: str,
    eol_of: Callable[[str], str | None],
    base_commit: str,
    cache: HashCache | None,
) -> Seen | None:
    """The file `rel` as git would store it; None when absent, a link, or not a regular file.

    `eol_of` gives its line-ending conversion: asked first when a cache is kept (its
    hashes are kept by it), else only when the file holds a CRLF.
    """
    eol = eol_of(rel) if cache is not None else None
    path = root / rel
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # a link, a folder, a FIFO...
    key = (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if cache is not None:
        hit = cache.get(rel, eol, key)
        if hit is not None:
            return hit
        at = cache.now()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # gone since, a link swapped in (ELOOP), unreadable
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        data = fh.read()
    if b"\r\n" in data:
        eol = eol if cache is not None else eol_of(rel)
        if eol is not None and _converts(root, rel, data, eol, base_commit):
            data = _crlf_to_lf(data)
    mode = "100755" if st.st_mode & stat.S_IXUSR else "100644"
    seen = Seen(hashlib.sha256(data).hexdigest(), mode)
    if cache is not None:
        # The key of what was read (fstat): a change between lstat and open is not kept.
        cache.put(
            rel,
            eol,
            (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns),
            seen,
            at,
        )
    return seen


def _converts(root: Path, rel: str, data: bytes, eol: str, base_commit: str) -> bool:
    if eol == EOL_TEXT:
        return True
    if _is_binary(data):
        return False
    # git's "safer autocrlf": text=auto never converts a file whose stored blob holds a CR.
    try:
        base = git(root, "cat-file", "blob", f"{base_commit}:{rel}")
    except OSError:  # not in the base commit
        return True
    return b"\r" not in base


def _crlf_to_lf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n")


def _is_binary(data: bytes) -> bool:
    """git's ``convert_is_binary``: a lone CR, a NUL, or too many control bytes."""
    cr, crlf, lf = data.count(b"\r"), data.count(b"\r\n"), data.count(b"\n")
    nonprintable = len(data) - len(data.translate(None, _NONPRINTABLE))
    nonprintable -= bool(data) and data[-1] == 0x1A  # a final ^Z is text (DOS EOF)
    printable = len(data) - nonprintable - cr - lf
    return cr != crlf or b"\0" in data or (printable >> 7) < nonprintable


def changed(before: Mapping[str, Seen], after: Mapping[str, Seen]) -> list[dict[str, str | None]]:
    """The effects between two snapshots, by path; modes only where the mode changed."""
    effects: list[dict[str, str | None]] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        effect: dict[str, str | None] = {
            "path": path,
            "sha256_before": None if old is None else old.sha256,
            "sha256_after": None if new is None else new.sha256,
        }
        if old is not None and new is not None and old.mode != new.mode:
            effect["mode_before"], effect["mode_after"] = old.mode, new.mode
        effects.append(effect)
    return effects
