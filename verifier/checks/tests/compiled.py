"""What runs is what was hashed and scanned: no bytecode of the tree, and no native code the
session changed without a person seeing it.

The changes check hashes the session's files and the tampering scan reads their
sources; Python would rather run a committed ``__pycache__/*.pyc`` (compiled from
other source) or a sourceless ``.pyc``, and a native extension runs code nobody
read. So, once the copy for the tests is made:

* `strip_bytecode` removes every ``__pycache__`` folder and every ``.pyc``/``.pyo``
  file from the copy (a note: honest repositories commit them by mistake), and our
  pytest entry never reads bytecode inside the copy nor imports a sourceless module
  (`verifier.checks.tests.entries.pytest_entry`);
* `changed_native` names the native extensions (the suffixes of
  ``importlib.machinery.EXTENSION_SUFFIXES``, the platforms' library suffixes, and
  versioned ``.so.N``) that differ from the base commit: added, or with other bytes.
  After a run that would pass, each is `tests.native_code_changed`, inconclusive, for
  a person to judge (`inconclusive`). Unchanged ones are the base's and run.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path

from verifier._internal.git import Git
from verifier._internal.paths import unsafe_reason
from verifier.errors import InfrastructureError
from verifier.findings import CheckResult, CheckStatus, Finding

__all__ = [
    "CODE",
    "Compiled",
    "NativeReadError",
    "changed_native",
    "inconclusive",
    "is_native",
    "scan_copy",
    "strip_bytecode",
]

CODE = "tests.native_code_changed"
_BYTECODE = (*importlib.machinery.BYTECODE_SUFFIXES, ".pyc", ".pyo")
_NATIVE = (*importlib.machinery.EXTENSION_SUFFIXES, ".so", ".pyd", ".dll", ".dylib", ".sl")
_VERSIONED = re.compile(r"\.so(\.\d+)+$")
_MAX_FINDINGS = 20


class NativeReadError(InfrastructureError):
    """The base commit's tree could not be read to compare native extensions with."""

    code = "native_read"


def is_native(name: str) -> bool:
    """Whether a file name is a native extension or shared library."""
    return name.endswith(_NATIVE) or _VERSIONED.search(name) is not None


class Compiled:
    """What one walk of the copy found: the bytecode to remove, the native files to judge."""

    def __init__(self) -> None:
        self.bytecode: list[str] = []
        self.native: list[str] = []


def scan_copy(copy: Path) -> Compiled:
    """One walk of the copy (links are not followed): its bytecode and native files."""
    found = Compiled()
    for folder, dirs, names in os.walk(copy):
        rel = Path(folder).relative_to(copy)
        for name in list(dirs):
            if name == "__pycache__":
                found.bytecode.append((rel / name).as_posix())
                dirs.remove(name)
        for name in names:
            path = (rel / name).as_posix()
            if name.endswith(_BYTECODE):
                found.bytecode.append(path)
            elif is_native(name):
                found.native.append(path)
    return found


def strip_bytecode(copy: Path, found: Compiled) -> tuple[str, ...]:
    """Remove the bytecode `found` in the copy; the note that says so (none if none)."""
    for rel in found.bytecode:
        path = copy / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    if not found.bytecode:
        return ()
    shown = ", ".join(found.bytecode[:3]) + (
        f" and {len(found.bytecode) - 3} more" if len(found.bytecode) > 3 else ""
    )
    return (
        f"bytecode in the tree not used, removed from the copy ({shown}): modules run from "
        "their sources",
    )


def changed_native(repo_path: Path, base: str | None, copy: Path, native: list[str]) -> list[str]:
    """The native files of the copy that are not the base commit's (added, or other bytes).

    Nothing without a base commit to compare with. Raises `NativeReadError` when git
    cannot list the base's tree.
    """
    if not native or base is None:
        return []
    at_base: dict[str, str] = {}
    git = Git(repo_path, error=NativeReadError)
    for record in git.run("ls-tree", "-r", "-z", "--full-tree", base).split(b"\0"):
        meta, _, raw = record.partition(b"\t")
        path = os.fsdecode(raw)
        if record and unsafe_reason(path) is None and is_native(path.rsplit("/", 1)[-1]):
            at_base[path] = meta.decode("ascii").split(" ")[2]
    return sorted(rel for rel in native if not _same_blob(copy / rel, at_base.get(rel)))


def _same_blob(path: Path, oid: str | None) -> bool:
    if oid is None or path.is_symlink() or not path.is_file():
        return False
    algorithm = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
    digest = algorithm(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest() == oid


def inconclusive(result: CheckResult, changed: list[str]) -> CheckResult:
    """`result`, inconclusive when it would pass and native code changed: one finding a path."""
    if result.status is not CheckStatus.PASS or not changed:
        return result
    findings = [
        Finding(
            CODE,
            f"{path}: native code the session added or changed ran with the tests; it cannot "
            "be read like source: a person should judge it",
            path=path,
            expected="the base's native extensions, or none",
            found="not as at the base commit",
        )
        for path in changed[:_MAX_FINDINGS]
    ]
    if len(changed) > _MAX_FINDINGS:
        last = findings[-1]
        more = len(changed) - _MAX_FINDINGS
        findings[-1] = replace(last, message=f"{last.message} (and {more} more not shown)")
    return replace(result, status=CheckStatus.ERROR, findings=(*result.findings, *findings))
