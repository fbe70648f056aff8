"""Repository-relative paths: what a claim may name, and how to open it safely."""

from __future__ import annotations

import hashlib
import os
import stat
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import BinaryIO

import pathspec

_CHUNK = 1 << 20


def unsafe_reason(path: str) -> str | None:
    """Why `path` cannot name a file inside the repository, or None when it can.

    The contract's rule: a relative POSIX path, compared byte for byte, with no
    absolute form, ``..``, backslash, NUL or empty segment. A ``.`` segment is
    refused too: git never names a file that way, so the claim could not match;
    and so is a segment some file system takes for ``.git`` (`is_dotgit`): that
    is git's storage, not content.
    """
    if path == "":
        return "the path is empty"
    if "\x00" in path:
        return "the path contains a NUL character"
    if "\\" in path:
        return "the path contains a backslash"
    if path.startswith("/"):
        return "the path is absolute"
    segments = path.split("/")
    if ".." in segments:
        return "the path has a '..' segment"
    if "" in segments:
        return "the path has an empty segment"
    if "." in segments:
        return "the path has a '.' segment"
    if any(is_dotgit(segment) for segment in segments):
        return "the path is inside a '.git' folder, which is git's, not the repository's"
    return None


# Code points HFS+ ignores when it compares names: ".g\u200cit" is ".git" there.
_HFS_IGNORED = dict.fromkeys(
    map(ord, "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
             "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")
)  # fmt: skip


def is_dotgit(name: str) -> bool:
    """Whether some file system takes the path segment `name` for git's ``.git`` folder.

    git's fsck rules (``hasDotgit``): any case (``.GIT``); HFS+ ignoring some
    invisible code points; NTFS dropping trailing dots and spaces (``.git.``),
    reading ``.git:stream`` as ``.git``, and the short name ``git~1``. A tree
    holding such a name would write into the repository of whoever checks it out.
    """
    if name.isascii() and "git" not in name.lower():  # the common case, quickly
        return False
    if name.translate(_HFS_IGNORED).lower() == ".git":
        return True
    ntfs = name.lower().partition(":")[0].rstrip(". ")
    return ntfs in (".git", "git~1")


def unicode_variant(path: str, existing: Collection[str]) -> str | None:
    """Another normal form (NFC/NFD) of `path` that exists, to say so in a message."""
    for form in ("NFC", "NFD"):
        other = unicodedata.normalize(form, path)
        if other != path and other in existing:
            return f"{other!r} exists (the {form} form of this path); paths compare byte for byte"
    return None


def glob_matches(pattern: str, path: str) -> bool:
    """Whether `path` matches the protected-path `pattern`, with git's wildmatch rules.

    As in ``.gitignore``: ``*`` and ``?`` stop at ``/``, ``**`` spans folders,
    ``[...]`` is a class, a pattern ending in ``/`` names a folder and all under
    it, and a pattern with no ``/`` other than a trailing one (``conftest.py``) matches
    at any depth (``a/b/conftest.py``); a leading ``/`` anchors it at the root.
    Each pattern stands alone: a leading ``!`` or ``#`` is taken literally, never
    as a negation or a comment, so no entry can un-protect a path.
    """
    return _glob_spec(pattern).match_file(path)


@cache
def _glob_spec(pattern: str) -> pathspec.GitIgnoreSpec:
    literal = "\\" + pattern if pattern.startswith(("!", "#")) else pattern
    return pathspec.GitIgnoreSpec.from_lines([literal])


def worktree_state(mode: str, content: str) -> str:
    """One working-tree path as read: its git mode and the SHA-256 of its bytes, or link target.

    ``"100644 <sha256>"``, ``"100755 <sha256>"``, ``"120000 <target>"``: the
    changes check and the copy for the tests (`verifier._internal.snapshot`) each
    describe what they read this way, so a file whose bytes, mode or link
    target changed between the two reads is seen (`tests.head_moved`).
    """
    return f"{mode} {content}"


class UnsafeFile(Exception):
    """The working-tree path is a symlink, leaves the root, or is not a regular file."""

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        self.reason = reason
        super().__init__(reason)


#: End-of-line conversions git applies on the way into the repository (``git add``):
#: ``text`` (the ``text`` attribute set, or an ``eol`` given): every CRLF becomes LF;
#: ``auto`` (``text=auto``): the same, unless the file looks binary.
EOL_TEXT = "text"
EOL_AUTO = "auto"


@dataclass(frozen=True, slots=True)
class FileHashes:
    """A working-tree file as we read it: SHA-256 of its bytes, its git blob id, its mode.

    `stored` is (SHA-256, blob id) of the bytes git would store when an
    end-of-line conversion changed them (`hash_in_root`'s `eol`), else None:
    then the raw bytes are what git stores.
    """

    sha256: str
    blob_sha1: str
    executable: bool
    stored: tuple[str, str] | None = None


def hash_in_root(root: Path, rel: str, eol: str | None = None) -> FileHashes | None:
    """Hash the file `rel` under `root` as it streams; None when it does not exist.

    `eol` (`EOL_TEXT`, `EOL_AUTO`) is the conversion git's attributes ask for
    the path: the bytes git would store are hashed too (`FileHashes.stored`),
    with git's built-in rules (``convert.c``), never a filter program.

    Every folder on the way is checked with lstat and opened relative to the
    previous one, and the file itself with O_NOFOLLOW and O_NONBLOCK, so nothing
    outside the root is ever opened, a link is never followed, and a FIFO cannot
    block us, even if the tree changes while we read. Raises `UnsafeFile` for a
    link, anything but a regular file, or a file that cannot be read.
    """
    parts = rel.split("/")
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        reason = f"the repository cannot be opened: {exc.strerror}"
        raise UnsafeFile("change.unreadable", reason) from None
    try:
        for depth, name in enumerate(parts[:-1]):
            st = _lstat(name, fd)
            if st is None:
                return None
            if stat.S_ISLNK(st.st_mode):
                where = "/".join(parts[: depth + 1])
                raise UnsafeFile("change.symlink", f"{where!r} on the way is a symbolic link")
            if not stat.S_ISDIR(st.st_mode):
                return None
            nfd = _open(name, fd, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            os.close(fd)
            fd = nfd
        st = _lstat(parts[-1], fd)
        if st is None:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeFile("change.symlink", "the file is a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile("change.not_a_file", "the path is not a regular file")
        ffd = _open(parts[-1], fd, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(ffd, "rb") as fh:
            return _hash_stream(fh, os.fstat(ffd), eol)
    finally:
        os.close(fd)


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a name too long, a permission refused...
        raise UnsafeFile("change.unreadable", f"cannot be read: {exc.strerror}") from None


def _open(name: str, dir_fd: int, flags: int) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:  # also a link or a folder swapped in since the lstat
        raise UnsafeFile("change.unreadable", f"cannot be read: {exc.strerror}") from None


def _hash_stream(fh: BinaryIO, st: os.stat_result, eol: str | None = None) -> FileHashes:
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile("change.not_a_file", "the path stopped being a regular file")
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(f"blob {st.st_size}\0".encode(), usedforsecurity=False)
    stats = None if eol is None else TextStats()
    total = 0
    while chunk := fh.read(_CHUNK):
        sha256.update(chunk)
        blob.update(chunk)
        if stats is not None:
            stats.feed(chunk)
        total += len(chunk)
    if total != st.st_size:
        raise UnsafeFile("change.unreadable", "the file changed size while it was read")
    stored = None
    if stats is not None and stats.converts(eol):
        stored = _hash_converted(fh, total - stats.crlf)
    return FileHashes(sha256.hexdigest(), blob.hexdigest(), bool(st.st_mode & stat.S_IXUSR), stored)


def _hash_converted(fh: BinaryIO, size: int) -> tuple[str, str]:
    """(SHA-256, blob id) of the file with each CRLF made LF: a second pass, streamed.

    The blob id's header needs the converted size, known after the first pass.
    """
    fh.seek(0)
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    crlf = CrlfToLf()
    total = 0
    while chunk := fh.read(_CHUNK):
        out = crlf.feed(chunk)
        sha256.update(out)
        blob.update(out)
        total += len(out)
    out = crlf.end()
    sha256.update(out)
    blob.update(out)
    if total + len(out) != size:
        raise UnsafeFile("change.unreadable", "the file changed while it was read")
    return sha256.hexdigest(), blob.hexdigest()


class CrlfToLf:
    """git's CRLF to LF conversion on the way in, over chunks: a CR at a chunk's end waits.

    A CR not followed by LF is kept (``\r\r\n`` becomes ``\r\n``), as git's
    ``crlf_to_git`` does for ``text``; for ``text=auto`` a lone CR makes the
    file binary, so it is never converted at all.
    """

    def __init__(self) -> None:
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._held + chunk if self._held else chunk
        if data.endswith(b"\r"):
            self._held, data = b"\r", data[:-1]
        else:
            self._held = b""
        return data.replace(b"\r\n", b"\n")

    def end(self) -> bytes:
        held, self._held = self._held, b""
        return held


# Bytes git's ``gather_stats`` counts as non-printable: controls other than BS, TAB,
# LF, FF, CR, ESC, and DEL.
_NONPRINTABLE = bytes([*(b for b in range(32) if b not in (8, 9, 10, 12, 13, 27)), 127])
_NOT_NONPRINTABLE = bytes(b for b in range(256) if b not in _NONPRINTABLE)


class TextStats:
    """git's ``gather_stats`` over chunks: what decides whether ``text=auto`` converts a file."""

    def __init__(self) -> None:
        self.crlf = 0
        self.cr = 0
        self.lf = 0
        self.nul = False
        self.nonprintable = 0
        self.size = 0
        self.last = -1
        self._held_cr = False

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._held_cr and chunk[0] == 0x0A:
            self.crlf += 1
        self.crlf += chunk.count(b"\r\n")
        self._held_cr = chunk[-1] == 0x0D
        self.cr += chunk.count(b"\r")
        self.lf += chunk.count(b"\n")
        self.nul = self.nul or b"\0" in chunk
        self.nonprintable += len(chunk.translate(None, _NOT_NONPRINTABLE))
        self.size += len(chunk)
        self.last = chunk[-1]

    def is_binary(self) -> bool:
        """git's ``convert_is_binary``: a lone CR, a NUL, or too many control bytes."""
        nonprintable = self.nonprintable - (self.last == 0x1A)  # a final ^Z is text (DOS EOF)
        printable = self.size - self.nonprintable - self.cr - self.lf
        return self.cr != self.crlf or self.nul or (printable >> 7) < nonprintable

    def converts(self, eol: str | None) -> bool:
        """Whether git's conversion `eol` changes these bytes (`EOL_TEXT`, `EOL_AUTO`)."""
        if eol is None or not self.crlf:
            return False
        return eol == EOL_TEXT or not self.is_binary()
