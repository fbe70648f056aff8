"""The monitor's side of a run: its settings written beside our entry, and its events judged.

The monitor itself (`verifier.checks.tests.entries.monitor`) runs inside the test
process; here the verifier tells it, in ``monitor.json`` beside the entry, which
files of the copy are the base's tests (trusted), which files the session
changed (an event from code the session did not change counts only when a
changed file's code is on the stack), which changed files are data a test
should not read, and where our JUnit report is written. Then the events it
sent become findings:

* ``tests.tampering_suspected`` (inconclusive) for an event of its table, a
  runner object replaced, a plugin or hook implementation the tree registered,
  a line of our reporter asked for from the tree's code;
* ``tests.changed_data_read`` (inconclusive, unless the repository's
  ``changed_data`` is ``"accept"``) for a changed file outside the test paths
  that the base's tests opened: the session may have edited the data the tests
  compare against to match its code (docs/security.md).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from verifier.checks.tests.results import MonitorEvent
from verifier.checks.tests.testinfra import is_test_infra
from verifier.findings import Finding

__all__ = [
    "CODES",
    "MAX_FINDINGS",
    "MONITOR",
    "SOURCE_FILES",
    "code",
    "findings",
    "prepare",
    "watched",
]

MONITOR = Path(__file__).resolve().parent / "entries" / "monitor.py"
# Changed files a test may read as they are: the code the change is about (a test may
# read the module under test's source, as inspect.getsource or doctest do).
SOURCE_FILES = (".py", ".pyi")
MAX_FINDINGS = 20
CODES = frozenset({"tests.tampering_suspected", "tests.changed_data_read"})


def watched(changed: Sequence[str], test_paths: Sequence[str]) -> list[str]:
    """The changed files a test must not read: outside the test paths, not Python source."""
    return sorted(
        p for p in changed if not is_test_infra(p, test_paths) and not p.endswith(SOURCE_FILES)
    )


def code(changed: Sequence[str], test_paths: Sequence[str]) -> list[str]:
    """The changed files outside the test paths: the session's code, for the monitor."""
    return sorted(p for p in changed if not is_test_infra(p, test_paths))


def prepare(
    entry_folder: Path,
    work: Path,
    test_paths: Sequence[str],
    changed: Sequence[str] | None,
    junit: Path,
    base_texts: Callable[[Sequence[str]], dict[str, bytes]] | None = None,
) -> None:
    """Put the monitor and its settings beside our entry in `entry_folder`; `base_texts`
    reads the base's bytes of paths (those it has), for the lines the session changed."""
    shutil.copyfile(MONITOR, entry_folder / MONITOR.name)
    tests = []
    for folder, dirs, names in os.walk(work):
        rel = Path(folder).relative_to(work)
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            path = (rel / name).as_posix()
            if path.endswith(".py") and is_test_infra(path, test_paths):
                tests.append(path)
    settings: dict[str, object] = {
        "root": str(work),
        "tests": sorted(tests),
        "junit": str(junit),
        "watch": watched(changed or (), test_paths),
    }
    if changed is not None:
        changed_code = code(changed, test_paths)
        settings["changed"] = changed_code
        if base_texts is not None:
            settings["new_lines"] = new_lines(work, changed_code, base_texts)
    (entry_folder / "monitor.json").write_text(json.dumps(settings), encoding="utf-8")


def new_lines(
    work: Path, changed: Sequence[str], base_texts: Callable[[Sequence[str]], dict[str, bytes]]
) -> dict[str, list[int]]:
    """The lines (numbered as at the head, from 1) of each changed Python file of the copy
    that are new or changed relative to the base: an event at another line of it is the
    base's code doing what it did at the base, and counts only when a new line is further
    out on the stack (as the static scan reports only new statements). A file the base
    does not have is left out: all its lines are new."""
    wanted = [p for p in changed if p.endswith(".py")]
    base = base_texts(wanted) if wanted else {}
    found: dict[str, list[int]] = {}
    for path, before in base.items():
        try:
            after = (work / path).read_bytes()
        except OSError:
            continue
        found[path] = changed_lines(before.splitlines(), after.splitlines())
    return found


def changed_lines(old: Sequence[bytes], new: Sequence[bytes]) -> list[int]:
    """The numbers (from 1) of the lines of `new` that a diff from `old` inserts or replaces.

    The lines both share at the start and at the end are the same lines, unchanged
    (as every diff program takes them); only the middle goes through `difflib`, whose
    matching costs far more than a linear scan (0.18 s of CPU for one changed line
    of a 5,000-line file, when the whole file went through it)."""
    start, end = 0, min(len(old), len(new))
    while start < end and old[start] == new[start]:
        start += 1
    tail = 0
    while tail < end - start and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    middle_old, middle_new = old[start : len(old) - tail], new[start : len(new) - tail]
    lines: list[int] = []
    matcher = difflib.SequenceMatcher(None, middle_old, middle_new, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            lines.extend(range(start + j1 + 1, start + j2 + 1))
    return lines


def findings(events: Sequence[MonitorEvent], changed_data: str) -> list[Finding]:
    """The findings of what the monitor saw, at most `MAX_FINDINGS` (the last counts the
    rest). A finding of the monitor's says so in its `found` (``monitor: ...``), where
    the static scan's names its pattern."""
    found: list[Finding] = []
    for event in events:
        if event.what == "data_read":
            if changed_data != "accept":
                found.append(
                    Finding(
                        "tests.changed_data_read",
                        f"the base's test {event.by} read {event.file}, which the session "
                        "changed: the data the tests compare against may have been made to "
                        "agree with the code",
                        path=event.file,
                        expected="the data the base's tests read as it is at the base",
                        found=f"read by {event.by} at line {event.line}",
                    )
                )
            continue
        where = f" at line {event.line}" if event.file and event.line else ""
        found.append(
            Finding(
                "tests.tampering_suspected",
                f"the monitor saw {event.what}{where} in the test run: {event.detail}; "
                "a person should judge whether this tampers with the tests",
                path=event.file or None,
                expected="no code reaching into the test machinery",
                found=f"monitor: {event.what}{where}: {event.detail}",
            )
        )
    if len(found) > MAX_FINDINGS:
        rest = len(found) - MAX_FINDINGS + 1
        last = found[MAX_FINDINGS - 1]
        found[MAX_FINDINGS - 1] = replace(last, message=f"{last.message} (and {rest - 1} more)")
        del found[MAX_FINDINGS:]
    return found
