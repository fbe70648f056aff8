"""Repository-relative paths: what a claim may name, and how to open it safely."""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Collection
from functools import cache
from pathlib import Path


def unsafe_reason(path: str) -> str | None:
    """Why `path` cannot name a file inside the repository, or None when it can.

    The contract's rule: a relative POSIX path, compared byte for byte, with no
    absolute form, ``..``, backslash, NUL or empty segment. A ``.`` segment is
    refused too: git never names a file that way, so the claim could not match;
    and so is a ``.git`` segment in any case: that is git's storage, not content.
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
    if any(segment.lower() == ".git" for segment in segments):
        return "the path is inside a '.git' folder, which is git's, not the repository's"
    return None


def unicode_variant(path: str, existing: Collection[str]) -> str | None:
    """Another normal form (NFC/NFD) of `path` that exists, to say so in a message."""
    for form in ("NFC", "NFD"):
        other = unicodedata.normalize(form, path)
        if other != path and other in existing:
            return f"{other!r} exists (the {form} form of this path); paths compare byte for byte"
    return None


def glob_matches(pattern: str, path: str) -> bool:
    """Match `path` against a glob where ``**`` spans folders and ``*`` does not."""
    return _glob_regex(pattern).fullmatch(path) is not None


@cache
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


class UnsafeFile(Exception):
    """The working-tree path is a symlink, leaves the root, or is not a regular file."""

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        self.reason = reason
        super().__init__(reason)


def read_in_root(root: Path, rel: str) -> bytes | None:
    """The bytes of `rel` under `root`, None when absent; never follows a link.

    Every folder on the way is checked with lstat, and the file is opened with
    O_NOFOLLOW relative to a directory descriptor, so nothing outside the root
    is ever opened, even if the tree changes while we read.
    """
    parts = rel.split("/")
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for depth, name in enumerate(parts[:-1]):
            try:
                st = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                return None
            if stat.S_ISLNK(st.st_mode):
                where = "/".join(parts[: depth + 1])
                raise UnsafeFile("change.symlink", f"{where!r} on the way is a symbolic link")
            if not stat.S_ISDIR(st.st_mode):
                return None
            nfd = os.open(name, flags_dir, dir_fd=fd)
            os.close(fd)
            fd = nfd
        try:
            st = os.lstat(parts[-1], dir_fd=fd)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeFile("change.symlink", "the file is a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile("change.not_a_file", "the path is not a regular file")
        ffd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
        with os.fdopen(ffd, "rb") as fh:
            return fh.read()
    finally:
        os.close(fd)
