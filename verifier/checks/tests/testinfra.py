"""Test infrastructure from a tree the agent did not write.

The files that decide how the tests run are the agent's to change too: a
weakened assertion, a ``conftest.py`` that skips everything, a ``pytest.ini``
that collects nothing. So, as SWE-bench does with its test files, the copy for
the tests gets them from the base commit (from the tip of the ``trusted_ref``
when one is configured), whatever the head holds:

* pytest's configuration (`CONFIG_NAMES`: the names of pytest's own table, read from
  the pytest that runs) and ``conftest.py``, at any depth;
* the repository's ``test_paths`` globs (`DEFAULT_TEST_PATHS` by default).

`use_base_test_infra` rewrites the copy: a path of that kind the session added
is removed (its tests do not run), one it changed is put back as it was, one it
deleted is restored; it returns the notes and every path it so took from the
base (`BaseInfra`), which the tampering scan skips and nothing else. Each is a
note of the verdict, not a failure: an honest
session that adds a dependency to ``pyproject.toml`` is still delivered, and
what the agent did to the tests is visible. An operator who wants such a
change to fail lists it in ``protected_paths`` (``on_change = "fail"``); one
whose agents are expected to write tests sets ``test_infra_from_base = false``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from verifier._internal.git import Git
from verifier._internal.paths import glob_matches, unsafe_reason
from verifier.errors import InfrastructureError

__all__ = [
    "CONFIG_NAMES",
    "DEFAULT_TEST_PATHS",
    "BaseInfra",
    "TestInfraError",
    "is_test_infra",
    "pytest_config_names",
    "use_base_test_infra",
]


def pytest_config_names() -> tuple[str, ...]:
    """The names of the files pytest looks for its configuration in, in its order of
    precedence: its own table (``CONFIG_LOADERS_BY_NAME`` of ``_pytest.config.findpaths``,
    or the list in ``locate_config`` of a pytest before 9), read from the source of the
    pytest installed with the verifier, the one that runs ``{python} -m pytest``. Read, not
    imported: importing pytest's configuration costs a fifth of a second."""
    spec = importlib.util.find_spec("_pytest")
    origin = spec.submodule_search_locations if spec is not None else None
    source = Path(next(iter(origin or []), "")) / "config" / "findpaths.py"
    try:
        tree = ast.parse(source.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return _imported_config_names()
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names = {getattr(t, "id", None) for t in targets}
        if names & {"CONFIG_LOADERS_BY_NAME", "config_names"}:
            items = value.keys if isinstance(value, ast.Dict) else getattr(value, "elts", [])
            found = tuple(
                k.value for k in items if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
            if found and len(found) == len(items):
                return found
    return _imported_config_names()


def _imported_config_names() -> tuple[str, ...]:
    """The table, from pytest imported (a source of another shape than we read)."""
    from _pytest.config import findpaths

    table = getattr(findpaths, "CONFIG_LOADERS_BY_NAME", None)
    if table is not None:
        return tuple(table)
    consts = findpaths.locate_config.__code__.co_consts
    return next(c for c in consts if isinstance(c, tuple) and "pytest.ini" in c)


# Files pytest reads its configuration from (its own table), and the plugins it loads by
# name from any folder (``conftest.py``).
CONFIG_NAMES = (*pytest_config_names(), "conftest.py")
# Where tests live unless the repository says otherwise (`test_paths`).
DEFAULT_TEST_PATHS = ("tests/**", "test/**", "**/test_*.py", "**/*_test.py")
_MODE_LINK = "120000"
_MAX_NOTES = 20


class TestInfraError(InfrastructureError):
    """The base versions of the test infrastructure could not be read."""

    code = "test_infra"

    __test__ = False  # not a pytest test class, whatever its name


@dataclass(frozen=True)
class BaseInfra:
    """What `use_base_test_infra` did to the copy: its notes, and the paths of the test
    infrastructure, each in the copy as at the source or removed from it (`paths`):
    the head's bytes of those never run."""

    notes: tuple[str, ...]
    paths: frozenset[str]


@dataclass(frozen=True)
class _Entry:
    mode: str
    oid: str


def is_test_infra(path: str, test_paths: Sequence[str] = DEFAULT_TEST_PATHS) -> bool:
    """Whether `path` (relative, ``/``-separated) is test infrastructure."""
    return PurePosixPath(path).name in CONFIG_NAMES or any(
        glob_matches(pattern, path) for pattern in test_paths
    )


def use_base_test_infra(
    repo_path: Path,
    base: str,
    copy: Path,
    *,
    test_paths: Sequence[str] = DEFAULT_TEST_PATHS,
    trusted_ref: str | None = None,
) -> BaseInfra:
    """Make the test infrastructure in `copy` what it is at `base` (or `trusted_ref`'s tip).

    `copy` is the head state materialized for the tests; nothing else of it is
    touched, and the repository is only read. Returns the notes, one per path
    removed, put back or restored (at most `_MAX_NOTES`, then a count), and the
    paths it governs: every one of them is in the copy as at the source, or absent.
    Raises `TestInfraError` when git cannot give the base versions.
    """
    git = Git(repo_path, error=TestInfraError)
    source = _commit(git, trusted_ref if trusted_ref is not None else base)
    where = f"{trusted_ref} ({source[:12]})" if trusted_ref is not None else "the base commit"
    at_base = {
        path: entry for path, entry in _tree(git, source).items() if is_test_infra(path, test_paths)
    }
    in_copy = {path for path in _files(copy) if is_test_infra(path, test_paths)}

    notes: list[str] = []
    for path in sorted(in_copy - at_base.keys()):
        _remove(copy / path)
        what = (
            "test configuration not in {}, not used"
            if _is_config(path)
            else "test not in {}, not run"
        )
        notes.append(f"{path}: {what.format(where)}")
    restore = []
    for path, entry in sorted(at_base.items()):
        if path not in in_copy:
            restore.append((path, entry, f"{path}: missing at the head, restored from {where}"))
        elif not _same(copy / path, entry):
            restore.append((path, entry, f"{path}: changed from {where}, used as it is there"))
    _write(git, copy, restore)
    notes.extend(note for _, _, note in restore)
    if len(notes) > _MAX_NOTES:
        more = len(notes) - _MAX_NOTES
        notes = [*notes[:_MAX_NOTES], f"and {more} more test infrastructure paths as at {where}"]
    return BaseInfra(tuple(notes), frozenset(in_copy | at_base.keys()))


def _is_config(path: str) -> bool:
    return PurePosixPath(path).name in CONFIG_NAMES


def _commit(git: Git, name: str) -> str:
    done = git.call("rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}")
    if done.returncode != 0:
        raise TestInfraError(f"cannot read the test infrastructure: {name!r} is not a commit")
    return done.stdout.decode("ascii").strip()


def _tree(git: Git, commit: str) -> dict[str, _Entry]:
    """The commit's files and links by path (submodules and unsafe paths left out)."""
    entries: dict[str, _Entry] = {}
    for record in git.run("ls-tree", "-r", "-z", "--full-tree", commit).split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, oid = meta.decode("ascii").split(" ")
        path = os.fsdecode(raw_path)
        if kind == "blob" and unsafe_reason(path) is None:
            entries[path] = _Entry(mode, oid)
    return entries


def _files(root: Path) -> list[str]:
    """Every file and link of the copy, relative; links to folders are not followed."""
    found: list[str] = []
    for folder, dirs, names in os.walk(root):
        rel = Path(folder).relative_to(root)
        for name in dirs:
            if (Path(folder) / name).is_symlink():
                found.append((rel / name).as_posix())
        found.extend((rel / name).as_posix() for name in names)
    return found


def _same(path: Path, entry: _Entry) -> bool:
    """Whether the copy's file is the base entry: kind, executable bit and git blob id."""
    if entry.mode == _MODE_LINK:
        return path.is_symlink() and _blob_id(os.fsencode(os.readlink(path)), entry.oid)
    if path.is_symlink() or not path.is_file():
        return False
    if bool(path.stat().st_mode & 0o100) != (entry.mode == "100755"):
        return False
    return _blob_id(path.read_bytes(), entry.oid)


def _blob_id(data: bytes, oid: str) -> bool:
    algorithm = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
    return algorithm(b"blob %d\0" % len(data) + data).hexdigest() == oid


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _write(git: Git, copy: Path, restore: list[tuple[str, _Entry, str]]) -> None:
    """Write the base versions into the copy, replacing whatever stands in their way."""
    if not restore:
        return
    with git.cat_file([entry.oid for _, entry, _ in restore]) as batch:
        for path, entry, _ in restore:
            data = batch.read(entry.oid)
            target = copy / path
            _clear_parents(copy, PurePosixPath(path).parent)
            if target.exists() or target.is_symlink():
                _remove(target)
            if entry.mode == _MODE_LINK:
                link = os.fsdecode(data)
                if os.path.isabs(link) or ".." in PurePosixPath(link).parts:
                    continue  # never a link out of the copy; the path stays absent
                os.symlink(link, target)
            else:
                target.write_bytes(data)
                target.chmod(0o755 if entry.mode == "100755" else 0o644)


def _clear_parents(copy: Path, parent: PurePosixPath) -> None:
    """Make every folder on the way a real folder: a link or a file there is removed."""
    here = copy
    for part in parent.parts:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            here.unlink()
        here.mkdir(exist_ok=True)
