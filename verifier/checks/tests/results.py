"""Read a run's results: our pytest plugin's events, JUnit XML reports, unittest's counts.

The tests check decides *which* results a run has (docs/runners.md); this module
only reads them. Every file it reads was written, or could have been replaced,
by the code under test, so each is opened without following a link and without
blocking (a FIFO must not hang us), must be a regular file, and is read up to a
bound. JUnit files inside the run's copy are reached folder by folder from the
copy's root, refusing any link on the way, so a report can never be read from
outside the copy. XML is parsed with `defusedxml` (no entity expansion, no
external resources).

A JUnit report is counted by its ``<testcase>`` elements and their outcome (a
``<failure>``, ``<error>`` or ``<skipped>`` child), never by the totals a
``<testsuite>`` states: some reporters leave those out (node's built-in junit
reporter writes its totals as XML comments), and a count that is not derived
from the cases proves nothing.
"""

from __future__ import annotations

import errno
import fcntl
import glob as globlib
import hashlib
import hmac
import json
import os
import re
import stat
import threading
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import defusedxml  # type: ignore[import-untyped]
from defusedxml.ElementTree import fromstring as _defused_fromstring  # type: ignore[import-untyped]

__all__ = [
    "MAX_REPORT_BYTES",
    "MAX_REPORT_FILES",
    "SUMMARY_KEYS",
    "Channel",
    "MonitorEvent",
    "OutcomeCounts",
    "PytestRun",
    "UnreadableResults",
    "Unsealed",
    "count_junit",
    "find_reports",
    "parse_pytest_summary",
    "prepare_reports",
    "read_bounded",
    "read_junit_file",
    "read_junit_reports",
    "read_monitor",
    "read_pytest_events",
    "read_unittest",
    "unittest_counts",
    "unseal",
]

# All the reports of one run together; our own pytest report alone has the same bound.
MAX_REPORT_BYTES = 64 << 20
MAX_REPORT_FILES = 1000
MAX_UNITTEST_BYTES = 1 << 20
UNITTEST_KEYS = (
    "tests_run",
    "failures",
    "errors",
    "skipped",
    "expected_failures",
    "unexpected_successes",
)


class UnreadableResults(Exception):
    """The results cannot be read, so no test can be proven to have run; the message says why."""


class _TooLarge(UnreadableResults):
    pass


@dataclass(frozen=True)
class OutcomeCounts:
    """How many tests ran and how each ended."""

    tests: int
    failures: int
    errors: int
    skipped: int
    # unittest only: an expected failure is not a pass, an unexpected success fails the run.
    expected_failures: int = 0
    unexpected_successes: int = 0

    @property
    def passed(self) -> int:
        # unittest counts errors of setUpClass/setUpModule, which are not in testsRun.
        ended_otherwise = (
            self.failures
            + self.errors
            + self.skipped
            + self.expected_failures
            + self.unexpected_successes
        )
        return max(self.tests - ended_otherwise, 0)

    def to_dict(self) -> dict[str, int]:
        return {
            "passed": self.passed,
            "failed": self.failures,
            "errors": self.errors,
            "skipped": self.skipped,
        }

    def __add__(self, other: OutcomeCounts) -> OutcomeCounts:
        return OutcomeCounts(
            self.tests + other.tests,
            self.failures + other.failures,
            self.errors + other.errors,
            self.skipped + other.skipped,
            self.expected_failures + other.expected_failures,
            self.unexpected_successes + other.unexpected_successes,
        )


def count_junit(data: bytes) -> OutcomeCounts:
    """Count the ``<testcase>`` elements of one JUnit XML document by their outcome.

    A case with an ``<error>`` child is an error, else with a ``<failure>`` a failure,
    else with a ``<skipped>`` skipped; any other case passed.
    """
    try:
        root: ET.Element = _defused_fromstring(data)
    except ET.ParseError as exc:
        raise UnreadableResults(f"not XML: {exc}") from None
    except defusedxml.DefusedXmlException as exc:
        raise UnreadableResults(f"refused XML ({type(exc).__name__}): {exc}") from None
    if root.tag not in ("testsuites", "testsuite", "testcase"):
        raise UnreadableResults(f"not a JUnit report: the root element is <{root.tag}>")
    tests = failures = errors = skipped = 0
    for case in root.iter("testcase"):
        tests += 1
        children = {child.tag for child in case}
        if "error" in children:
            errors += 1
        elif "failure" in children:
            failures += 1
        elif "skipped" in children:
            skipped += 1
    return OutcomeCounts(tests, failures, errors, skipped)


def read_bounded(path: Path, limit: int, dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file, opened without following a link or blocking, up to `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        raise UnreadableResults("no such file") from None
    except OSError as exc:
        raise UnreadableResults(_os_reason(exc)) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnreadableResults("not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise _TooLarge(f"over the {limit} byte limit")
    return data


def read_junit_file(path: Path) -> OutcomeCounts:
    """The counts of one JUnit report outside the copy (the one we ask pytest to write)."""
    return count_junit(read_bounded(path, MAX_REPORT_BYTES))


def prepare_reports(root: Path, globs: Sequence[str]) -> list[str]:
    """Make the copy ready for a run whose reports match `globs`; return what was removed.

    A file that matches before the run was committed, not written by this run: it is
    removed, so it can never be read as this run's result. The fixed folders of each
    glob (``reports`` of ``reports/*.xml``) are created, since some reporters (node's)
    do not create the folder of their destination.
    """
    removed = []
    for rel in find_reports(root, globs):
        try:
            parent = _open_folder(root, _parts(rel)[:-1])
        except UnreadableResults:
            continue  # through a link: it cannot be read after the run either
        try:
            name = _parts(rel)[-1]
            if not stat.S_ISDIR(os.lstat(name, dir_fd=parent).st_mode):
                os.unlink(name, dir_fd=parent)
                removed.append(rel)
        finally:
            os.close(parent)
    for pattern in globs:
        fixed = []
        for part in _parts(_checked(pattern))[:-1]:
            if globlib.has_magic(part):
                break
            fixed.append(part)
        if fixed and not os.path.lexists(root.joinpath(*fixed)):
            folder = root.joinpath(*fixed)
            if folder.resolve().is_relative_to(root.resolve()):
                folder.mkdir(parents=True, exist_ok=True)
    return removed


def find_reports(root: Path, globs: Sequence[str]) -> list[str]:
    """The paths under `root` (relative, sorted) that match any of `globs`."""
    found: set[str] = set()
    for pattern in globs:
        found.update(globlib.glob(_checked(pattern), root_dir=root, recursive=True))
    return sorted(rel for rel in found if _parts(rel))


def junit_outcomes(data: bytes) -> dict[str, str]:
    """Each ``<testcase>`` of one JUnit document by its id, ``classname.name`` (JUnit's own
    notation; ``name`` alone without a class), and how it ended (`outcome_of`). Read after
    `count_junit` accepted the document."""
    root: ET.Element = _defused_fromstring(data)
    found: dict[str, set[str]] = {}
    for case in root.iter("testcase"):
        classname, name = case.get("classname") or "", case.get("name") or ""
        marks = found.setdefault(f"{classname}.{name}" if classname else name, set())
        children = {child.tag for child in case}
        if "error" in children:
            marks.add("error")
        elif "failure" in children:
            marks.add("failure")
        elif "skipped" in children:
            marks.add("skipped")
    return {test: outcome_of(marks) for test, marks in found.items()}


def read_junit_reports(
    root: Path, globs: Sequence[str], outcomes: dict[str, str] | None = None
) -> tuple[OutcomeCounts, list[str]]:
    """Sum the counts of the JUnit files under `root` that match `globs`; also list them,
    and fill `outcomes`, when given, with each case's end by its id (`junit_outcomes`).

    Folders that match are passed over. Raises `UnreadableResults` when no file
    matches, or one cannot be read or parsed (naming it): a run's results are
    all of its reports or none.
    """
    total = OutcomeCounts(0, 0, 0, 0)
    files: list[str] = []
    budget = MAX_REPORT_BYTES
    for rel in find_reports(root, globs):
        try:
            data = _read_inside(root, rel, budget)
        except _IsAFolder:
            continue
        except _TooLarge:
            raise UnreadableResults(
                f"{rel}: over the {MAX_REPORT_BYTES} byte limit for all the reports of a run"
            ) from None
        except UnreadableResults as exc:
            raise UnreadableResults(f"{rel}: {exc}") from None
        files.append(rel)
        if len(files) > MAX_REPORT_FILES:
            raise UnreadableResults(f"more than {MAX_REPORT_FILES} report files match")
        budget -= len(data)
        try:
            total += count_junit(data)
        except UnreadableResults as exc:
            raise UnreadableResults(f"{rel}: {exc}") from None
        if outcomes is not None:
            outcomes.update(junit_outcomes(data))
    if not files:
        raise UnreadableResults(f"no file matches {list(globs)}")
    return total, files


def read_unittest(path: Path) -> OutcomeCounts:
    """The counts of our unittest entry's JSON, from a file."""
    try:
        raw = read_bounded(path, MAX_UNITTEST_BYTES)
    except UnreadableResults as exc:
        raise UnreadableResults(f"the unittest result {path.name}: {exc}") from None
    return unittest_counts(raw)


def unittest_counts(raw: bytes) -> OutcomeCounts:
    """The counts our unittest entry (`entries/unittest_entry.py`) sent: one JSON line
    (sealed by the monitor when it ran: `unseal`; the monitor's events are left out)."""
    if raw.startswith(b'{"event":"seal"'):
        sealed = unseal(raw)
        if sealed.problem is not None:
            raise UnreadableResults(f"{sealed.problem}: something else wrote to our channel")
        lines = [line for line in sealed.lines if not _is_monitor(line)]
        raw = b"".join(line + b"\n" for line in lines)
    if not raw.strip():
        raise UnreadableResults("our unittest entry reported nothing (the run ended first)")
    if raw.rstrip(b"\n").count(b"\n"):
        raise UnreadableResults("more than one line: something else wrote to our channel")
    try:
        doc: Any = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnreadableResults(f"the unittest result is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise UnreadableResults("the unittest result is not a JSON object")
    values = []
    for key in UNITTEST_KEYS:
        value = doc.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UnreadableResults(
                f"the unittest result has {key}={value!r}, not a non-negative integer"
            )
        values.append(value)
    return OutcomeCounts(*values)


def _is_monitor(line: bytes) -> bool:
    return line.startswith((b'{"event":"monitor', b'{"event":"data_read"'))


@dataclass(frozen=True)
class MonitorEvent:
    """What the monitor (`entries/monitor.py`) saw: an event of its table, a runner object
    replaced (`what`, with the tree's `file` and `line` when known), or a changed data
    file a test read (`what` = ``data_read``, `file` the data, `by` the test file)."""

    what: str
    file: str
    line: int
    detail: str
    by: str = ""

    @classmethod
    def of(cls, event: dict[str, Any]) -> MonitorEvent | None:
        line = event.get("line")
        number = line if isinstance(line, int) and not isinstance(line, bool) else 0
        if event.get("event") == "data_read":
            return cls(
                "data_read", str(event.get("file", "")), number, "", str(event.get("by", ""))
            )
        if event.get("event") == "monitor_error":
            return cls("monitor-error", "", 0, str(event.get("error", "")))
        if event.get("event") == "monitor":
            return cls(
                str(event.get("what", "")),
                str(event.get("file", "")),
                number,
                str(event.get("detail", "")),
            )
        return None


def read_monitor(data: bytes) -> tuple[MonitorEvent, ...]:
    """What the monitor saw, from a sealed channel's lines that hold (`unseal`)."""
    found = []
    for line in unseal(data).lines:
        event = _event(line)
        seen = MonitorEvent.of(event) if event is not None else None
        if seen is not None:
            found.append(seen)
    return tuple(found)


@dataclass(frozen=True)
class Unsealed:
    """The lines of a sealed channel whose seal holds (`lines`: their JSON, in order), and
    the first problem: no seal first, a line whose seal does not hold (forged, or written
    out of turn: every line after a dropped one), one cut short."""

    lines: list[bytes]
    problem: str | None = None


def unseal(data: bytes) -> Unsealed:
    """Check a channel our monitor sealed: its first line holds the key, each later line
    is ``<mac> <json>``, the MAC being HMAC-SHA256 (first 16 bytes, hex) of the line's
    number (from 0) and its JSON under that key."""
    raw = data.split(b"\n")
    problem: str | None = None
    if raw and raw[-1] == b"":
        raw.pop()
    elif raw:
        problem = "the last line is cut short (the run ended while it was written)"
        raw.pop()
    if not raw:
        return Unsealed([], problem)
    try:
        first: Any = json.loads(raw[0])
        key = bytes.fromhex(first["key"]) if first.get("event") == "seal" else b""
    except (
        UnicodeDecodeError,
        json.JSONDecodeError,
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
    ):
        key = b""
    if len(key) != 32:
        return Unsealed([], "line 1 is not the monitor's seal")
    lines: list[bytes] = []
    for number, line in enumerate(raw[1:], 2):
        mac, _, body = line.partition(b" ")
        message = b"%d " % len(lines) + body
        expected = hmac.new(key, message, hashlib.sha256).hexdigest()[:32].encode()
        if hmac.compare_digest(mac, expected):
            lines.append(body)
        else:
            # Not ours (forged), or ours out of turn (one before it was dropped): the lines
            # of ours that follow still hold, with the numbers they were sealed with.
            problem = problem or f"line {number} is not an event of our plugin"
    return Unsealed(lines, problem)


class _IsAFolder(Exception):
    pass


def _checked(pattern: str) -> str:
    """A glob is relative and stays inside the copy (config validates this too)."""
    parts = pattern.replace("\\", "/").split("/")
    if not pattern or pattern.startswith("/") or ".." in parts or "\0" in pattern:
        raise ValueError(f"{pattern!r} is not a relative path inside the copy")
    return pattern


def _parts(rel: str) -> list[str]:
    return [p for p in rel.split(os.sep) if p not in ("", ".")]


def _open_folder(root: Path, parts: Sequence[str]) -> int:
    """A descriptor of the folder `parts` under `root`, reached without following a link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            try:
                child = os.open(
                    part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd
                )
            except OSError as exc:
                raise UnreadableResults(
                    f"the folder {part!r} on its way: {_os_reason(exc)}"
                ) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_inside(root: Path, rel: str, limit: int) -> bytes:
    parts = _parts(rel)
    folder = _open_folder(root, parts[:-1])
    try:
        if stat.S_ISDIR(os.lstat(parts[-1], dir_fd=folder).st_mode):
            raise _IsAFolder(rel)
        return read_bounded(Path(parts[-1]), limit, dir_fd=folder)
    except FileNotFoundError:
        raise UnreadableResults("no such file") from None
    finally:
        os.close(folder)


def _os_reason(exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return "a link, or not a folder (links are not followed)"
    return exc.strerror or str(exc)


# What pytest's closing summary line counts, as our plugin's reports are categorised.
SUMMARY_KEYS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
_SUMMARY = re.compile(r"^=* ?((?:\d+ [a-z]+(?:, )?)+|no tests ran) in [0-9.]+s(?: \([^)]*\))? ?=*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PLURALS = {"errors": "error", "warnings": "warning"}
# Linux's fcntl commands for a pipe's capacity (the fcntl module names them from 3.10 on
# Linux only).
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)


class Channel:
    """Read a pipe to its end on a thread of its own, keeping up to `limit` bytes.

    The run's events arrive while it goes; reading them as they come means a long
    suite never blocks on a full pipe. They are read in batches: the pipe is
    enlarged (`PIPE_BYTES`, where the system allows) and, after a read that
    emptied it, the thread waits before the next: `BATCH_S` after a read of more
    than an eighth of the pipe, else `IDLE_S`, so a suite of 14,000 lines costs a
    few hundred reads rather than one wake-up of this process per line (0.35–0.5 s
    of CPU, measured on more-itertools' suite), and a slow one a few a second.
    `close()` ends the wait at once, waits for the end of the pipe (every writer
    gone: the run is over and its process group killed) for up to `wait_s`, then
    returns what was read; `overflowed` says bytes were dropped.
    """

    #: The pipe's capacity asked for: at `BATCH_S`, 1 MiB holds 50 MB/s of events.
    PIPE_BYTES = 1 << 20
    BATCH_S = 0.02
    #: The wait after a read of an eighth of the pipe or less (a 64 KiB pipe: 80 KB/s).
    IDLE_S = 0.1

    def __init__(self, read_fd: int, limit: int = MAX_REPORT_BYTES) -> None:
        self._fd = read_fd
        self._limit = limit
        self._chunks: list[bytes] = []
        self._size = 0
        self.overflowed = False
        self.capacity = _enlarge(read_fd, self.PIPE_BYTES)
        self.reads = 0
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._read, name="verifier-results", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, self.capacity)
            except OSError:
                return
            self.reads += 1
            if not chunk:
                return
            if len(chunk) < self.capacity and not self._closing.is_set():
                # Emptied: let the next lines gather, longer when few came.
                busy = len(chunk) > self.capacity // 8
                self._closing.wait(self.BATCH_S if busy else self.IDLE_S)
            room = self._limit - self._size
            if len(chunk) > room:
                self.overflowed = True
                chunk = chunk[: max(room, 0)]
            self._chunks.append(chunk)
            self._size += len(chunk)

    def close(self, wait_s: float = 5.0) -> bytes:
        self._closing.set()
        self._thread.join(wait_s)
        done = not self._thread.is_alive()
        if done:
            os.close(self._fd)  # else the thread still reads it; it ends with the process
        else:
            self.overflowed = True  # a writer outlived the run: what we have is not all
        return b"".join(self._chunks)


def _enlarge(fd: int, size: int) -> int:
    """The capacity of the pipe `fd` after asking for `size` bytes (Linux's F_SETPIPE_SZ;
    elsewhere, or when refused, the 64 KiB most systems give)."""
    try:
        return max(fcntl.fcntl(fd, F_SETPIPE_SZ, size), 65536)
    except OSError:
        try:
            return max(fcntl.fcntl(fd, F_GETPIPE_SZ), 65536)
        except OSError:
            return 65536


@dataclass(frozen=True)
class PytestRun:
    """What our pytest plugin reported (`verifier.checks.tests.entries.pytest_reporter`).

    `counts` is per test, as a JUnit report counts its cases; `stats` per report, as
    pytest's closing summary line counts them; `exitstatus` the session's status
    at its end, None when the session never finished; `problem` names the first
    line that is not one of ours (`unseal`), or an event after the end of the session;
    `monitor` what the monitor saw; `outcomes` each test's end by its node id (`outcome_of`).
    """

    counts: OutcomeCounts
    stats: dict[str, int] = field(default_factory=dict)
    exitstatus: int | None = None
    events: int = 0
    problem: str | None = None
    monitor: tuple[MonitorEvent, ...] = ()
    outcomes: Mapping[str, str] = field(default_factory=dict)


#: How a test ended, by its id, in the runner's own notation: the classification reads these.
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


def outcome_of(marks: set[str]) -> str:
    """A test's end from what its reports said: a failure or an error (at setup, call,
    teardown or collection) is failed; skipped with nothing else, skipped; else passed."""
    if marks & {"failure", "error"}:
        return FAILED
    return SKIPPED if marks == {"skipped"} else PASSED


def read_pytest_events(data: bytes) -> PytestRun:
    """Fold the plugin's JSON lines into per-test counts, summary stats and the session's end."""
    tests: dict[str, set[str]] = {}
    stats = dict.fromkeys(SUMMARY_KEYS, 0)
    exitstatus: int | None = None
    problem: str | None = None
    events = separate = 0
    sealed = unseal(data)
    problem = sealed.problem
    monitor: list[MonitorEvent] = []
    for number, raw in enumerate(sealed.lines, 2):
        event = _event(raw)
        if event is None:
            problem = problem or f"line {number} is not an event of our plugin"
            continue
        seen = MonitorEvent.of(event)
        if seen is not None:
            monitor.append(seen)  # whenever it came: the monitor watches to the end
            continue
        events += 1
        if exitstatus is not None:
            problem = problem or f"line {number}: an event after the session finished"
            continue
        kind = event.get("event")
        if kind == "session_finish" and isinstance(event.get("exitstatus"), int):
            exitstatus = event["exitstatus"]
        elif kind == "report":
            nodeid, when, outcome = event.get("nodeid"), event.get("when"), event.get("outcome")
            category = event.get("category")
            if not (isinstance(nodeid, str) and isinstance(when, str)):
                problem = problem or f"line {number}: a report without a test id"
                continue
            marks = tests.setdefault(nodeid, set())
            if outcome == "failed" and when == "teardown" and marks & {"failure", "error"}:
                # pytest's JUnit report opens a second case for it (junit's schema).
                separate += 1
            elif outcome == "failed":
                marks.add("failure" if when == "call" else "error")
            elif outcome == "skipped":
                marks.add("skipped")
            if isinstance(category, str) and category in stats and event.get("counts", True):
                stats[category] += 1
        elif kind != "start":
            problem = problem or f"line {number}: an unknown event {kind!r}"
    counts = OutcomeCounts(
        tests=len(tests) + separate,
        failures=sum(1 for m in tests.values() if "failure" in m and "error" not in m),
        errors=sum(1 for m in tests.values() if "error" in m) + separate,
        skipped=sum(1 for m in tests.values() if m == {"skipped"}),
    )
    outcomes = {nodeid: outcome_of(marks) for nodeid, marks in tests.items()}
    return PytestRun(counts, stats, exitstatus, events, problem, tuple(monitor), outcomes)


def _event(raw: bytes) -> dict[str, Any] | None:
    try:
        event: Any = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return event if isinstance(event, dict) and isinstance(event.get("event"), str) else None


def parse_pytest_summary(output: str) -> dict[str, int] | None:
    """The counts of pytest's closing summary line (the last one in `output`), or None.

    ``"1 failed, 2 passed, 1 warning in 0.12s"`` (quiet) or the same between
    ``=`` signs; ``"no tests ran in 0.01s"`` counts nothing.
    """
    for line in reversed(_ANSI.sub("", output).splitlines()):
        match = _SUMMARY.match(line.strip())
        if match is None:
            continue
        found = dict.fromkeys(SUMMARY_KEYS, 0)
        if match.group(1) != "no tests ran":
            for part in match.group(1).split(", "):
                number, word = part.split(" ", 1)
                word = _PLURALS.get(word, word)
                if word in found:
                    found[word] += int(number)
        return found
    return None
