"""The monitor: a PEP 578 audit hook the code under test cannot remove, and our sealed channel.

Loaded by our entries by file path (never by name) and installed with `install`
before any file of the tree under test is importable. Standard library only; it
runs on whatever Python 3.8+ the repository has.

What it does:

* **Seals the channel.** It draws a random key, writes it as the channel's first
  line (``{"event": "seal", "key": ...}``) while no code of the tree has run,
  and from then on every line of ours carries an HMAC-SHA256 of its sequence
  number and its bytes under that key (``<mac> <json>``). The key lives only in
  the closures of `install`, which nothing outside this module refers to (the
  entries keep this module out of ``sys.modules``). So the tree can neither
  forge a line of ours nor drop one (the numbers would skip), nor silence the
  channel by moving the descriptor (the lines that should follow never come).
* **Carries our reporter's lines.** The reporter sends each line with
  ``sys.audit("verifier.send", event)``; the hook seals it only when the stack
  that asks is ours and pytest's, called from our entry, with no frame of the
  tree, the standard library (a thread, a finalizer) or code of no file on it.
  Otherwise it reports a ``forged-line``. With each report and at the session's
  end it checks that pytest's machinery is what it was (`KEY_OBJECTS`,
  `KEY_HOOKS`, the plugins pytest registered: ``sys.audit("verifier.plugin", ...)``).
* **Watches the run.** The hook sees every audited event of the process
  (`EVENTS`, the table below, is the list it reports). An event is attributed
  to the file whose code raised it: the frames are walked from the event
  outwards, through the standard library where the event's rule lets the
  library pass the call on (`through`), and the first frame decides: the
  tree's non-test code, the tree's test code (the base's tests, trusted), or
  anything else (pytest, pluggy, other installed packages, our own files:
  the event is theirs, not reported). An event of the table from the tree
  (``scope = "code"``: its non-test code only; ``"tree"``: any of its files) is
  sent as ``{"event": "monitor", "what", "file", "line", "detail"}``.
* **Sees the data the tests read.** A file the verifier names as changed by the
  session (``watch``) opened by the base's test code is sent as
  ``{"event": "data_read", "file", "by", "line"}``.

The settings come from ``monitor.json`` beside this file, written by the
verifier: ``root`` (the copy), ``tests`` (its test files, relative), ``watch``
(changed data files, relative), ``changed`` (the files the session changed) and
``new_lines`` (per changed file the base has, the lines new relative to it): an
event at a line the session did not write counts only when a line it wrote is
further out on the stack; and ``junit`` (our report's path). The hot path costs a set lookup for
the events it does not watch; everything used at event time is bound at install,
so the tree rebinding ``os.write`` or ``sys._getframe`` changes nothing here.
"""

from __future__ import annotations

import _thread
import hashlib
import itertools
import json
import operator
import os
import sys
import sysconfig
import types
from typing import Any

# The events reported, as data: each names what it means, whose code it is
# reported from (`scope`: "code", the tree's non-test code; "tree", any of its
# files), how far the standard library may pass the call on (`through`: "stdlib",
# any standard-library frame is the caller's; "frames", any but those of KEEPERS, which
# keep the frame they read to themselves; "direct", none), whether it counts when it
# happens while a module outside the tree is imported (`imports`), and, for
# some, which arguments count (`names`, `prefixes`, `paths`).
EVENTS: dict[str, dict[str, Any]] = {
    "sys._getframe": {
        "what": "frame-walk",
        "detail": "sys._getframe(): a frame of the running stack",
        "scope": "code",
        "through": "frames",
    },
    "sys._current_frames": {
        "what": "frame-walk",
        "detail": "sys._current_frames(): the frames of every thread",
        "scope": "code",
        "through": "frames",
    },
    "object.__getattr__": {
        "what": "frame-walk",
        "detail": "a frame reached through an object's {name}",
        "scope": "code",
        "through": "frames",
        "names": ["tb_frame", "gi_frame", "cr_frame", "ag_frame"],
    },
    "object.__setattr__": {
        "what": "code-replaced",
        "detail": "a function's {name} replaced",
        "scope": "tree",
        "through": "stdlib",
        # What a function does with the arguments it is given: its code, and the defaults
        # of a function not the tree's (`on_setattr`).
        # (An attribute set on, or deleted from, a class of KEY_MODULES is `on_setattr`'s.)
        "names": ["__code__", "__defaults__", "__kwdefaults__"],
        # `unittest.mock` sets `__code__` while it is imported: not the tree's doing.
        "imports": False,
    },
    "code.__new__": {
        "what": "code-built",
        "detail": "a code object built at run time",
        "scope": "code",
        "through": "direct",
    },
    "compile": {
        "what": "code-built",
        "detail": "compile() of source built at run time",
        "scope": "code",
        "through": "direct",
    },
    "exec": {
        "what": "code-built",
        "detail": "exec() or eval() of code built at run time",
        "scope": "code",
        "through": "direct",
    },
    "gc.get_objects": {
        "what": "object-enumeration",
        "detail": "gc.get_objects(): every object of the process",
        "scope": "code",
        "through": "stdlib",
    },
    "gc.get_referrers": {
        "what": "object-enumeration",
        "detail": "gc.get_referrers(): the objects that refer to one",
        "scope": "code",
        "through": "stdlib",
    },
    "gc.get_referents": {
        "what": "object-enumeration",
        "detail": "gc.get_referents(): the objects one refers to",
        "scope": "code",
        "through": "stdlib",
    },
    "sys.settrace": {
        "what": "trace-hook",
        "detail": "sys.settrace(): a trace function sees every frame",
        "scope": "code",
        "through": "stdlib",
    },
    "sys.setprofile": {
        "what": "trace-hook",
        "detail": "sys.setprofile(): a profile function sees every frame",
        "scope": "code",
        "through": "stdlib",
    },
    "sys.addaudithook": {
        "what": "audit-hook",
        "detail": "sys.addaudithook(): a hook of its own on the process's events",
        "scope": "tree",
        "through": "stdlib",
    },
    "import": {
        "what": "runner-import",
        "detail": "import of {name}, the runner's internals",
        "scope": "code",
        "through": "stdlib",
        "prefixes": ["_pytest", "pluggy", "_verifier", "pytest_reporter", "monitor"],
    },
    "open": {
        "what": "channel-open",
        "detail": "open of {name}",
        "scope": "code",
        "through": "stdlib",
        # The process's descriptors, memory, command line and environment.
        "paths": [
            f"/proc/{who}/{what}"
            for who in ("self", "thread-self", "{pid}")
            for what in ("fd", "fdinfo", "mem", "cmdline", "environ", "maps", "map_files", "task")
        ]
        + ["/dev/fd"],
    },
    "os.listdir": {
        "what": "channel-open",
        "detail": "listing {name}",
        "scope": "code",
        "through": "stdlib",
        "paths": ["/proc/self/fd", "/dev/fd", "/proc/{pid}/fd", "/proc/thread-self/fd"],
    },
    "os.scandir": {
        "what": "channel-open",
        "detail": "listing {name}",
        "scope": "code",
        "through": "stdlib",
        "paths": ["/proc/self/fd", "/dev/fd", "/proc/{pid}/fd", "/proc/thread-self/fd"],
    },
    "os.kill": {
        "what": "signal",
        "detail": "a signal sent to the test process itself",
        "scope": "code",
        "through": "stdlib",
    },
    "signal.pthread_kill": {
        "what": "signal",
        "detail": "a signal sent to a thread of the test process",
        "scope": "code",
        "through": "stdlib",
    },
}
# Every ctypes event: reading or writing memory, calling C, loading libraries.
for _name in (
    "addressof",
    "cdata",
    "cdata/buffer",
    "create_string_buffer",
    "create_unicode_buffer",
    "dlopen",
    "dlsym",
    "get_errno",
    "set_errno",
    "string_at",
    "wstring_at",
):
    EVENTS["ctypes." + _name] = {
        "what": "ctypes",
        "detail": f"ctypes.{_name}: memory or C reached from Python",
        "scope": "code",
        "through": "stdlib",
        "imports": False,
    }
for _name in ("compile", "exec", "code.__new__"):
    EVENTS[_name]["imports"] = False
# The JUnit report our options have pytest write: no file of the tree opens it.
JUNIT = {
    "what": "results-file",
    "detail": "open of our JUnit report {name}",
    "scope": "tree",
}

# A test's outcome decided by the code under test: a skip or an expected failure
# (pytest's, or unittest's SkipTest) raised from the tree's non-test code, not by the
# test, its fixtures or the runner. Our reporter hands each such exception's traceback
# (or a collection skip's place) to the monitor: ``sys.audit("verifier.outcome", tb,
# name, path, line)``.
OUTCOME = {
    "what": "outcome-from-code",
    "detail": "{name} raised by the code under test decided a test's outcome",
}

# Standard-library functions that read a frame and keep it to themselves (a file name, a
# line, a module's name, a summary without frames): a frame-walk event raised in one is
# not its caller's. Any other standard-library function's is: one that hands frames back
# (`inspect.stack()`, `traceback.walk_tb`, asyncio's `Task.get_stack()`, reading
# `cr_frame` for its caller) passes the walk on, and one not listed here errs on the
# side of the caller (an honest caller is then `inconclusive`, not `delivered`).
KEEPERS = frozenset(
    {
        ("inspect", "getfile"),
        ("inspect", "findsource"),
        ("inspect", "getsourcelines"),
        ("inspect", "_get_code_position_from_tb"),
        ("inspect", "getframeinfo"),
        ("inspect", "getgeneratorstate"),
        ("inspect", "getcoroutinestate"),
        ("traceback", "print_stack"),
        ("traceback", "format_stack"),
        ("traceback", "extract_stack"),
        ("traceback", "clear_frames"),
        ("traceback", "extract"),  # StackSummary.extract, before Python 3.11
        ("traceback", "_extract_from_extended_frame_gen"),
        ("logging/__init__", "findCaller"),
        ("logging/__init__", "handleError"),
        ("warnings", "warn"),
        ("warnings", "_next_external_frame"),
        ("typing", "_caller"),
        ("types", "<module>"),
        ("enum", "_create_"),
        ("collections/__init__", "namedtuple"),
        ("subprocess", "_text_encoding"),
        ("unittest/result", "_is_relevant_tb_level"),
        ("doctest", "_normalize_module"),
        ("doctest", "_find_lineno"),
        ("doctest", "set_trace"),
        ("bdb", "set_trace"),
        ("bdb", "set_continue"),
        ("bdb", "get_stack"),
        ("pdb", "setup"),
        ("pdb", "set_trace"),
        ("dis", "distb"),
        ("dis", "from_traceback"),
        ("asyncore", "compact_traceback"),
        ("asyncio/coroutines", "is_running"),
        ("asyncio/coroutines", "_format_coroutine"),
        ("asyncio/format_helpers", "extract_stack"),
        ("asyncio/events", "__init__"),
        ("asyncio/futures", "__init__"),
        ("asyncio/streams", "__init__"),
    }
)
MAX_EVENTS = 200
# What a test's outcome depends on, checked to be the same objects (and, for functions,
# the same code) at every test's report and at the session's end as when pytest was
# configured: pytest's test protocol, report making, the summary's counting, the
# assertion helpers tests call, our reporter, and pluggy's hook calling.
# "module:qualified.name", read from the module's or the class's own dict; "a|b:name", the
# module as one pytest or the other spells it (pytest 9 moved approx out of python_api).
KEY_OBJECTS = (
    "_pytest.runner:runtestprotocol",
    "_pytest.runner:call_and_report",
    "_pytest.runner:call_runtest_hook",
    "_pytest.runner:check_interactive_exception",
    "_pytest.runner:pytest_runtest_protocol",
    "_pytest.runner:pytest_runtest_setup",
    "_pytest.runner:pytest_runtest_call",
    "_pytest.runner:pytest_runtest_teardown",
    "_pytest.runner:pytest_runtest_makereport",
    "_pytest.runner:CallInfo.from_call",
    "_pytest.runner:SetupState.setup",
    "_pytest.reports:TestReport.from_item_and_call",
    "_pytest.reports:TestReport.__init__",
    "_pytest.reports:BaseReport.passed",
    "_pytest.reports:BaseReport.failed",
    "_pytest.reports:BaseReport.skipped",
    "_pytest.python:pytest_pyfunc_call",
    "_pytest.python:Function.runtest",
    "_pytest.python:Function.setup",
    "_pytest.approx|_pytest.python_api:approx",
    "_pytest.approx|_pytest.python_api:ApproxScalar.__eq__",
    "_pytest.approx|_pytest.python_api:ApproxMapping.__eq__",
    "_pytest.approx|_pytest.python_api:ApproxSequenceLike.__eq__",
    "_pytest.raises|_pytest.python_api:raises",
    "_pytest.outcomes:fail",
    "_pytest.outcomes:skip",
    "_pytest.outcomes:xfail",
    "_pytest.outcomes:exit",
    "_pytest.unittest:TestCaseFunction.runtest",
    "_pytest.skipping:pytest_runtest_makereport",
    "_pytest.skipping:pytest_runtest_setup",
    "_pytest.skipping:pytest_runtest_call",
    "_pytest.main:pytest_runtestloop",
    "_pytest.main:wrap_session",
    "_pytest.main:Session.perform_collect",
    "_pytest.terminal:TerminalReporter.pytest_runtest_logreport",
    "_pytest.terminal:pytest_report_teststatus",
    "_pytest.terminal:build_summary_stats_line",
    "_pytest.terminal:TerminalReporter.build_summary_stats_line",
    "_pytest.junitxml:LogXML.pytest_runtest_logreport",
    "_pytest.junitxml:LogXML.pytest_sessionfinish",
    "_pytest.config:PytestPluginManager.register",
    "pluggy._manager:PluginManager.register",
    "pluggy._manager:PluginManager._hookexec",
    "pluggy._callers:_multicall",
    "pluggy._hooks:HookCaller.__call__",
    "pluggy._hooks:HookCaller.call_historic",
    "pytest:approx",
    "pytest:raises",
    "pytest:fail",
    "pytest:skip",
    "unittest.case:TestCase.run",
    "unittest.case:TestCase.assertEqual",
    "unittest.case:TestCase.assertTrue",
    "unittest.case:TestCase.assertRaises",
    "_verifier_pytest_reporter:_send",
    "_verifier_pytest_reporter:_report",
    "_verifier_pytest_reporter:pytest_runtest_logreport",
    "_verifier_pytest_reporter:pytest_report_teststatus",
    "_verifier_pytest_reporter:pytest_collectreport",
    "_verifier_pytest_reporter:pytest_sessionfinish",
)
# The modules whose classes and globals a test's outcome depends on: an attribute set on or
# deleted from one of their classes (an audited event) is reported when it happens; their
# globals (a module's setattr raises no event: `_pytest.runner.pytest_runtest_call` calls
# `_update_current_test_var`, a global of no KEY_OBJECTS) are compared, by identity, at every
# report and at the session's end with what they were when pytest was configured.
KEY_MODULES = (
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.python",
    "_pytest.python_api",
    "_pytest.approx",
    "_pytest.raises",
    "_pytest.outcomes",
    "_pytest.skipping",
    "_pytest.unittest",
    "_pytest.terminal",
    "_pytest.junitxml",
    "_pytest.main",
    "pluggy._manager",
    "pluggy._hooks",
    "pluggy._callers",
    "pluggy._result",
    "_verifier_pytest_reporter",
)
# The packages whose classes are key classes (of KEY_OBJECTS' classes and their bases).
KEY_PACKAGES = ("_pytest.", "pluggy.", "unittest.case")
# Globals Python itself adds to a module: warnings' registry of a warning its code issued.
MODULE_NOISE = frozenset({"__warningregistry__"})
# Class attributes pytest itself adds after the monitor starts: legacypath's properties and
# methods (`pytest_load_initial_conftests`, with a MonkeyPatch), and the mark of a node
# class warned about once. Accepted only with a value of pytest's: True, or a function or
# property of code in pytest's files.
PYTEST_ADDS = frozenset(
    {
        "fspath",
        "startdir",
        "invocation_dir",
        "rootdir",
        "inifile",
        "makedir",
        "_getini_unknown_type",
        "_pytest_diamond_inheritance_warning_shown",
    }
)
# Hooks whose implementations decide a test's outcome or its counting: at every report
# each implementation must belong to a plugin pytest registered, and be the function
# it was when first seen.
KEY_HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_pyfunc_call",
    "pytest_report_teststatus",
    "pytest_collectreport",
    "pytest_sessionfinish",
    "pytest_runtestloop",
)
MAX_EVENTS = 200
_MISSING = object()


def _settings(folder: str) -> dict[str, Any]:
    try:
        with open(os.path.join(folder, "monitor.json"), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


def _prefixes(path: str) -> tuple[str, ...]:
    """`path` as given and as resolved, each ending in a separator."""
    return tuple(sorted({p.rstrip(os.sep) + os.sep for p in (path, os.path.realpath(path))}))


class Classifier:
    """Whose file a code object's filename is: ``ours``, the tree's ``tree`` (code) or
    ``test`` (its test files, the base's), ``stdlib``, ``import`` (the import machinery),
    ``site`` (installed packages: pytest, pluggy, the rest), or ``unknown`` (code
    compiled at run time, files outside all of those), which counts as the tree's.

    Everything it uses is bound when it is made: the tree may rebind a module's
    functions, never this object's (nothing outside the monitor refers to it).
    """

    def __init__(self, folder: str, root: str, tests: frozenset[str]) -> None:
        self.ours = _prefixes(folder)
        self.root = _prefixes(root)
        self.tests = tests
        paths = sysconfig.get_paths()
        self.stdlib = tuple(
            p for k in ("stdlib", "platstdlib") if k in paths for p in _prefixes(paths[k])
        )
        self.trusted: set[str] = set()  # tree files of plugins pytest itself loaded by name
        self.cache: dict[str, tuple[str, str]] = {}
        self.passing: set[str] = set()  # the files whose frames `refusal` let through
        self.realpath = os.path.realpath
        self.isabs = os.path.isabs

    def __call__(self, filename: str) -> tuple[str, str]:
        """``(kind, path)``; the path relative for the tree's files."""
        found = self.cache.get(filename)
        if found is None:
            found = self.cache[filename] = self.classify(filename, True)
        return found

    def classify(self, filename: str, resolve: bool) -> tuple[str, str]:
        if filename.startswith("<frozen importlib"):
            return "import", filename
        if filename.startswith("<frozen "):
            return "stdlib", filename[8:-1]
        if type(filename) is not str or not self.isabs(filename):
            return "unknown", filename
        # The copy first: our folder may hold it (unittest's entry lies beside ``work/``).
        for prefix in self.root:
            if filename.startswith(prefix):
                rel = filename[len(prefix) :].replace(os.sep, "/")
                return ("test" if rel in self.tests else "tree"), rel
        for prefix in self.ours:
            if filename.startswith(prefix):
                return "ours", filename
        if "/site-packages/" in filename or "/dist-packages/" in filename:
            return "site", filename
        for prefix in self.stdlib:
            if filename.startswith(prefix):
                stem = filename[len(prefix) :].replace(os.sep, "/")
                return "stdlib", stem[:-3] if stem.endswith(".py") else stem
        if resolve:
            real = self.realpath(filename)
            if real != filename:
                return self.classify(real, False)
        return "unknown", filename


def actor(frame: Any, classify: Classifier, through: str, keepers: frozenset[Any]) -> Any:
    """The frame whose code an event is, walking out from `frame` as `through` allows:
    ``(kind, path, line, imported, frame)`` for the tree's code (``tree``, also for
    ``unknown`` code) or tests (``test``), else None. `imported` says a module was
    being imported on the way."""
    imported = False
    while frame is not None:
        code = frame.f_code
        kind, path = classify(code.co_filename)
        if kind == "tree" or kind == "test" or kind == "unknown":
            if kind == "tree" and path in classify.trusted:
                return None  # a plugin the base's configuration named
            return ("test" if kind == "test" else "tree"), path, frame.f_lineno, imported, frame
        if kind == "import":
            imported = True
        elif through == "any":
            pass  # a class of pytest's changed: whoever it was called by, outside pytest
        elif (
            kind != "stdlib"
            or through == "direct"
            or (through == "frames" and (path, code.co_name) in keepers)
        ):
            return None  # theirs: not stdlib, or a stdlib frame that does not pass it on
        frame = frame.f_back
    return None


def is_new(
    path: str, line: int, changed: frozenset[str], new_lines: dict[str, frozenset[int]]
) -> bool:
    """Whether `line` of the tree's file `path` is the session's: the file is one it
    changed, and the line is new relative to the base (every line of a file whose new
    lines are not known, a file the base does not have)."""
    if path not in changed:
        return False
    lines = new_lines.get(path)
    return lines is None or line in lines


def changed_caller(
    frame: Any,
    classify: Classifier,
    changed: frozenset[str],
    new_lines: dict[str, frozenset[int]] | None = None,
) -> tuple[str, int] | None:
    """The innermost frame, from `frame` outwards, at a line the session wrote (`is_new`),
    or of code of no file of the tree: ``(path, line)``, or None when there is none."""
    while frame is not None:
        kind, path = classify(frame.f_code.co_filename)
        if kind == "unknown" or (
            kind == "tree" and is_new(path, frame.f_lineno, changed, new_lines or {})
        ):
            return path, frame.f_lineno
        frame = frame.f_back
    return None


# Standard-library modules through which the runner itself calls our reporter: unittest's
# `subTest` (pytest's subtests report from inside its context manager) and contextlib.
# Any other standard-library frame on the stack of a line (a thread, a finalizer, a
# weakref callback) refuses it.
RUNNER_STDLIB = ("unittest/", "contextlib")


def refusal(frame: Any, classify: Classifier) -> tuple[str, str, int] | None:
    """Why a line of our reporter may not be sent from the stack at `frame` (the caller of
    ``sys.audit``): ``(kind, path, line)`` of the first frame that is not ours, the
    runner's, an installed package's or the base's tests, or of a stack that pytest did
    not call from our entry; None when it may."""
    if frame is None or classify(frame.f_code.co_filename)[0] != "ours":
        return ("unknown", "", 0) if frame is None else _named(frame, classify)
    # The files whose frames were let through: a file's kind never changes and the
    # trusted files only grow, so one let through once always is (one set lookup a frame
    # of a stack some 45 deep, at every line).
    passing = classify.passing
    last = frame
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename not in passing:
            kind, path = classify(filename)
            passed_on = kind == "stdlib" and path.startswith(RUNNER_STDLIB)
            if not passed_on and (
                kind in ("stdlib", "import", "unknown")
                or (kind == "tree" and path not in classify.trusted)
            ):
                return kind, path, frame.f_lineno
            passing.add(filename)
        last, frame = frame, frame.f_back
    if classify(last.f_code.co_filename)[0] != "ours":
        return _named(last, classify)
    return None


def _named(frame: Any, classify: Classifier) -> tuple[str, str, int]:
    kind, path = classify(frame.f_code.co_filename)
    return kind, path, frame.f_lineno


def _text(value: Any) -> str | None:
    """An argument as text, without calling any code of its type (the tree's, maybe)."""
    if type(value) is str:
        return value
    if type(value) is bytes:
        return value.decode("utf-8", "backslashreplace")
    return None


def _resolve(key: str, modules: dict[str, Any]) -> tuple[Any, str] | None:
    """``(namespace, name)`` of "module:qualified.name": the dict the object lives in (of
    the first of "a|b" that is imported)."""
    holder = _holder(key, modules)
    return None if holder is None else (vars(holder[0]), holder[1])


def space_state(space: dict[str, Any], label: str, reported: Any) -> list[Any]:
    """A namespace compared at every check, as `namespace_changed` reads it: [the dict, its
    values, its names, what it is, its names of KEY_OBJECTS (the snapshot's to report)]."""
    return [space, list(space.values()), list(space), label, reported]


def _holder(key: str, modules: dict[str, Any]) -> tuple[Any, str] | None:
    """``(module or class, name)`` of "module:qualified.name"."""
    module_names, _, qualname = key.partition(":")
    obj: Any = _MISSING
    for module_name in module_names.split("|"):
        obj = modules.get(module_name, _MISSING)
        if obj is not _MISSING:
            break
    parts = qualname.split(".")
    for part in parts[:-1]:
        if obj is _MISSING:
            return None
        obj = vars(obj).get(part, _MISSING)
    if obj is _MISSING:
        return None
    return obj, parts[-1]


def _code(obj: Any) -> Any:
    """The code of a function, classmethod, staticmethod, property or bound method of
    ours or pytest's; None for anything else (nothing of its type is called)."""
    kind = type(obj)
    if kind is classmethod or kind is staticmethod or kind is types.MethodType:
        obj = obj.__func__
    elif kind is property:
        obj = obj.fget
    return obj.__code__ if type(obj) is types.FunctionType else None


def install(fd: int, folder: str) -> None:
    """Seal the channel `fd` and add the audit hook, which then also carries our reporter's
    lines (``sys.audit("verifier.send", event[, config])``) and hears of the plugins
    pytest registers (``sys.audit("verifier.plugin", plugin, name)``). Nothing it makes
    is returned or kept where the tree can reach it."""
    settings = _settings(folder)
    os.set_inheritable(fd, False)  # processes the tests start do not get it
    # Bound now: the tree may rebind os.write or sys._getframe, never these names.
    write, getframe, get_ident = os.write, sys._getframe, _thread.get_ident
    sha256 = hashlib.sha256
    encode_str: Any = getattr(json.encoder, "c_encode_basestring_ascii", None)
    getcwd, realpath, isabs, join = os.getcwd, os.path.realpath, os.path.isabs, os.path.join
    modules, get_pid, exact_int, module_type = sys.modules, os.getpid, int, types.ModuleType
    keepers, max_events, missing = KEEPERS, MAX_EVENTS, _MISSING
    is_, repeat, chain, dict_get = operator.is_, itertools.repeat, itertools.chain, dict.get
    get_function, get_plugin = operator.attrgetter("function"), operator.attrgetter("plugin")
    get_values = operator.methodcaller("values")
    get_hookexec, get_impls = operator.attrgetter("_hookexec"), operator.attrgetter("_hookimpls")
    if encode_str is None:  # a Python without the C accelerator: the pure one, bound now
        encode_str = json.encoder.py_encode_basestring_ascii
    rules: dict[str, tuple[Any, ...]] = {}
    for name, rule in EVENTS.items():
        rules[name] = (
            rule["what"],
            rule["detail"],
            rule["scope"],
            rule["through"],
            rule.get("imports", True),
            frozenset(rule.get("names", ())),
            tuple(rule.get("prefixes", ())),
        )
    watched = frozenset(rules) | {
        "verifier.send",
        "verifier.plugin",
        "verifier.outcome",
        "object.__delattr__",
    }
    getattr_names = rules["object.__getattr__"][5]
    pid = str(get_pid())
    proc_paths = tuple(p.replace("{pid}", pid) for p in EVENTS["open"]["paths"])
    fd_lists = frozenset(p.replace("{pid}", pid) for p in EVENTS["os.listdir"]["paths"])
    junit = settings.get("junit") or ""
    channel_paths = frozenset({f"/proc/self/fd/{fd}", f"/dev/fd/{fd}", f"/proc/{pid}/fd/{fd}"})
    classify = Classifier(
        folder, settings.get("root") or getcwd(), frozenset(settings.get("tests") or ())
    )
    roots = classify.root
    watch = frozenset(settings.get("watch") or ())
    # The files the session changed: an event from a file it did not change counts when
    # a changed file's code is on the stack (a new call of old code), not otherwise.
    changed = settings.get("changed")
    changed = frozenset(changed) if isinstance(changed, list) else None
    # Of those, the lines new relative to the base (a file not named: all of its lines).
    new_lines = {
        path: frozenset(lines)
        for path, lines in (settings.get("new_lines") or {}).items()
        if isinstance(lines, list)
    }

    key = os.urandom(32)
    inner = bytes(b ^ 0x36 for b in key.ljust(64, b"\0"))
    outer = bytes(b ^ 0x5C for b in key.ljust(64, b"\0"))
    lock = _thread.allocate_lock()
    state: dict[str, int] = {"seq": 0}
    busy: set[int] = set()
    seen: set[tuple[Any, ...]] = set()
    snapshot: list[tuple[Any, ...]] = []  # (namespace, name, object, code, key) of KEY_OBJECTS
    config_box: list[Any] = []
    approved: set[int] = set()  # ids of the plugins pytest registered
    impls: dict[int, Any] = {}  # id(hook implementation) -> its function when first seen
    # Bumped at every assignment of a function's ``__code__`` (its audit event, which no
    # code can avoid): the only way a function's code changes. While it stays, what was
    # found of an object's code still holds, and is not read again (`verify`).
    code_epoch = [0]
    # id(hook implementation) -> (it, its function, its plugin, the epoch) when `verify`
    # last found nothing wrong with it: the same three objects at the same epoch would
    # be found the same (what it compares against only grows: the approved plugins, the
    # trusted files). The references keep the ids from being reused.
    clean: dict[int, tuple[Any, Any, Any, int]] = {}
    snapshot_epoch = [-1]  # the epoch at which the snapshot's code was last found intact
    # KEY_HOOKS as `verify` last found them with nothing wrong in any: (the epoch, the
    # callers, their hook calling, how many implementations each has, the implementations,
    # their functions, their plugins). The same objects at the same epoch would be found
    # the same, and are compared by identity only, in C (`unchanged`): the check one by
    # one, with an ``id()`` an implementation (an audit event each), cost 20 µs a report.
    clean_state: list[tuple[Any, ...]] = []
    suspected = [0]  # calls of `suspect`, each time, whether or not it was said before

    def unchanged(hooks: Any, epoch: int, caller_type: Any, impl_type: Any) -> bool:
        """Whether KEY_HOOKS in `hooks` are as in `clean_state`. Each object's type is
        checked to be pluggy's before any attribute of it is read."""
        if not clean_state or type(hooks) is not dict:
            return False
        was, callers, callings, counts, impls, functions, plugins = clean_state[0]
        if was != epoch:
            return False
        now = tuple(map(dict_get, repeat(hooks), KEY_HOOKS))
        if not (
            all(map(is_, now, callers))
            and all(map(is_, map(type, now), repeat(caller_type)))
            and all(map(is_, map(get_hookexec, now), callings))
        ):
            return False
        lists = tuple(map(get_impls, now))
        if not all(map(is_, map(type, lists), repeat(list))) or tuple(map(len, lists)) != counts:
            return False
        flat = tuple(chain(*lists))
        return (
            all(map(is_, flat, impls))
            and all(map(is_, map(type, flat), repeat(impl_type)))
            and all(map(is_, map(get_function, flat), functions))
            and all(map(is_, map(get_plugin, flat), plugins))
        )

    def put(data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[write(fd, view) :]
            except OSError:
                return  # the verifier is gone, or the descriptor taken: lines are missing

    def dumps(event: dict[str, Any]) -> bytes:
        parts = []
        for k, v in event.items():
            if type(v) is str:
                text = encode_str(v)
            elif v is True or v is False:
                text = "true" if v else "false"
            elif v is None:
                text = "null"
            elif type(v) is exact_int:
                text = exact_int.__repr__(v)
            else:
                text = encode_str(repr(type(v)))
            parts.append(encode_str(k) + ":" + text)
        return ("{" + ",".join(parts) + "}").encode("ascii")

    def seal(event: dict[str, Any]) -> None:
        body = dumps(event)
        with lock:
            seq = state["seq"]
            state["seq"] = seq + 1
            message = b"%d " % seq + body
            mac = sha256(outer + sha256(inner + message).digest()).hexdigest()[:32]
            put(mac.encode("ascii") + b" " + body + b"\n")

    def suspect(what: str, detail: str, path: str = "", line: int = 0) -> None:
        suspected[0] += 1
        mark = (what, path, line, detail)
        if mark in seen:
            return
        seen.add(mark)
        if len(seen) > max_events:
            return
        seal({"event": "monitor", "what": what, "file": path, "line": line, "detail": detail})

    def report(what: str, detail: str, found: Any) -> None:
        kind, path, line, _, frame = found
        if kind == "tree" and changed is not None and not is_new(path, line, changed, new_lines):
            caller = changed_caller(frame.f_back, classify, changed, new_lines)
            if caller is None:
                return  # the base's code, doing what it did at the base
            detail = f"{detail}, in {path}:{line}, which the session did not change"
            path, line = caller
        suspect(what, detail, path, line)

    def on_open(event: str, args: tuple[Any, ...]) -> None:
        text = _text(args[0]) if args else None
        if text is None:
            return
        if text == junit or text in channel_paths:
            found = actor(getframe(2), classify, "stdlib", keepers)
            if found is not None:
                report(JUNIT["what"], JUNIT["detail"].format(name=text), found)
            return
        if text.startswith(("/proc/", "/dev/fd")):
            if event == "open":
                hit = any(text == p or text.startswith(p + "/") for p in proc_paths)
            else:
                hit = text.rstrip("/") in fd_lists
            if hit:
                found = actor(getframe(2), classify, "stdlib", keepers)
                if found is not None and found[0] == "tree":
                    what, detail = rules[event][0], rules[event][1]
                    report(what, detail.format(name=text), found)
            return
        if event != "open" or not watch:
            return
        if isabs(text):
            if not text.startswith(roots):
                return  # the import system's own reads, mostly: nothing of the copy
            full = text
        else:
            full = join(getcwd(), text)
        real = realpath(full)
        rel = None
        for prefix in roots:
            if real.startswith(prefix):
                rel = real[len(prefix) :].replace(os.sep, "/")
        if rel is None or rel not in watch:
            return
        found = actor(getframe(2), classify, "stdlib", keepers)
        if found is None or found[0] != "test" or found[3]:
            return
        mark = ("data_read", rel, found[1])
        if mark not in seen:
            seen.add(mark)
            seal({"event": "data_read", "file": rel, "by": found[1], "line": found[2]})

    # What a test's outcome depends on, as it is now, before any file of the tree is
    # importable: the baseline every report is checked against.
    for name in KEY_OBJECTS:
        where = _resolve(name, modules)
        if where is not None:  # else a part this pytest does not have
            space, attr = where
            obj = space.get(attr, missing)
            snapshot.append((space, attr, obj, _code(obj), name))
    # The key classes, by id: (the class, its name): those KEY_OBJECTS are read from and
    # their bases, and every class of approx's module (its tolerances are class attributes).
    key_types: dict[int, tuple[Any, str]] = {}
    covered: dict[int, set[str]] = {}  # id(module or class) -> its names of KEY_OBJECTS
    for name in KEY_OBJECTS:
        holder = _holder(name, modules)
        if holder is not None:
            covered.setdefault(id(holder[0]), set()).add(holder[1])
        if holder is not None and isinstance(holder[0], type):
            for cls in holder[0].__mro__:
                if vars(cls).get("__module__", "").startswith(KEY_PACKAGES):
                    key_types[id(cls)] = (cls, f"{vars(cls)['__module__']}.{cls.__qualname__}")
    # The namespaces compared at every check: [the dict (a module's, a key class's), its
    # values, its names, what it is, its names of KEY_OBJECTS (the snapshot's, reported
    # there)]; flat, the values and the sizes of them all.
    spaces: list[list[Any]] = []
    for module_name in KEY_MODULES:
        module = modules.get(module_name)
        if type(module) is not module_type:
            continue
        space = vars(module)
        spaces.append(space_state(space, module_name, covered.get(id(module), ())))
        if module_name in ("_pytest.approx", "_pytest.python_api"):
            for value in list(space.values()):
                if isinstance(value, type) and vars(value).get("__module__") == module_name:
                    key_types[id(value)] = (value, f"{module_name}.{value.__qualname__}")
    for cls, label in key_types.values():
        spaces.append(space_state(vars(cls), label, covered.get(id(cls), ())))
    namespaces = tuple(state[0] for state in spaces)

    def flat_values() -> list[Any]:
        """[the values of all `spaces` as last seen, in one list; the size of each]."""
        return [list(chain(*(state[1] for state in spaces))), tuple(map(len, namespaces))]

    space_values = flat_values()
    manager_type = (
        vars(modules["pluggy._manager"]).get("PluginManager")
        if "pluggy._manager" in modules
        else None
    )
    hookexec_function = vars(manager_type).get("_hookexec") if type(manager_type) is type else None
    pluggy_types = tuple(
        vars(modules[m]).get(n) if m in modules else None
        for m, n in (("pluggy._hooks", "HookCaller"), ("pluggy._hooks", "HookImpl"))
    )

    def take_snapshot(config: Any) -> None:
        # pytest_configure: the run's plugin manager and hooks, as pytest made them.
        config_box[:] = [config]
        manager = config.pluginmanager
        for space, attr, what in (
            (vars(manager), "_inner_hookexec", "the plugin manager's hook calling"),
            (vars(manager), "hook", "the plugin manager's hooks"),
            (vars(config), "hook", "the configuration's hooks"),
            (vars(config), "pluginmanager", "the configuration's plugin manager"),
        ):
            snapshot.append((space, attr, space.get(attr, missing), None, what))

    def verify(everything: bool) -> None:
        """Monitor events for what changed since the start. Nothing the tree may have put
        in pytest's place is called or read: only objects of the types pytest made."""
        intact = True
        epoch = code_epoch[0]
        recode = snapshot_epoch[0] != epoch
        for space, attr, obj, code, name in snapshot:
            now = space.get(attr, missing)
            if now is not obj or (code is not None and recode and _code(obj) is not code):
                intact = False
                suspect("runner-replaced", f"{name} is not the object it was when pytest started")
        if intact:
            snapshot_epoch[0] = epoch
        if tuple(map(len, namespaces)) != space_values[1] or not all(
            map(is_, chain(*map(get_values, namespaces)), space_values[0])
        ):
            for state in spaces:
                space, values = state[0], state[1]
                if len(space) != len(values) or not all(map(is_, space.values(), values)):
                    namespace_changed(state)
            space_values[:] = flat_values()
        if not config_box or not intact or None in pluggy_types:
            return
        caller_type, impl_type = pluggy_types
        config = config_box[0]
        manager = config.pluginmanager
        hookexec = hookexec_function
        hooks = vars(config.hook)
        if not everything and unchanged(hooks, epoch, caller_type, impl_type):
            return  # every key hook as it was when nothing was wrong with any
        flagged = suspected[0]
        # What this pass reads, kept as `clean_state` if it finds nothing wrong.
        record: tuple[list[Any], ...] = ([], [], [], [], [], [])
        callers, callings, counts, impls_seen, functions, plugins = record
        exact = True
        for name in list(hooks) if everything else KEY_HOOKS:
            caller = hooks.get(name)
            callers.append(caller)
            if caller is None:
                continue
            if type(caller) is not caller_type:
                suspect("hook-replaced", f"{name}: its hook caller was replaced")
                continue
            calling = caller._hookexec
            callings.append(calling)
            if (
                type(calling) is not types.MethodType
                or calling.__self__ is not manager
                or calling.__func__ is not hookexec
            ):
                suspect("hook-replaced", f"{name}: its hook calling was replaced")
            now = caller._hookimpls
            exact &= type(now) is list  # what `unchanged` compares
            listed = list(now)
            counts.append(len(listed))
            for impl in listed:
                if type(impl) is not impl_type:
                    suspect("hook-injected", f"{name}: an implementation pytest did not make")
                    continue
                function, plugin = impl.function, impl.plugin
                impls_seen.append(impl)
                functions.append(function)
                plugins.append(plugin)
                known = clean.get(id(impl))
                if (
                    known is not None
                    and known[0] is impl
                    and known[1] is function
                    and known[2] is plugin
                    and known[3] == epoch
                ):
                    continue  # as it was when nothing was wrong with it
                before = impls.setdefault(id(impl), function)
                code = _code(function)
                kind, path = classify(code.co_filename) if code is not None else ("unknown", "")
                line = code.co_firstlineno if code is not None else 0
                if id(plugin) not in approved:
                    suspect(
                        "hook-injected",
                        f"{name} implemented by a plugin pytest did not register",
                        path,
                        line,
                    )
                elif function is not before:
                    suspect(
                        "hook-replaced",
                        f"{name}: an implementation's function was replaced",
                        path,
                        line,
                    )
                elif kind == "unknown" or (kind == "tree" and path not in classify.trusted):
                    suspect("hook-injected", f"{name} implemented by the tree's code", path, line)
                else:
                    clean[id(impl)] = (impl, function, plugin, epoch)
        if not everything and exact and suspected[0] == flagged and None not in callers:
            clean_state[:] = [(epoch, *(tuple(part) for part in record))]
        if everything:
            for plugin in list(vars(manager).get("_name2plugin", {}).values()):
                if plugin is not None and id(plugin) not in approved:
                    suspect("plugin-registered", "a plugin registered by the tree")

    def namespace_changed(state: list[Any]) -> None:
        """Which names of a key module or class were rebound, added or deleted since the
        last check: each reported (but warnings' registry); the state is the new one."""
        space, values, names, label, reported = state
        before = dict(zip(names, values))  # noqa: B905 (strict= is Python 3.10+)
        for name in list(space):
            if type(name) is not str:
                suspect("runner-replaced", f"{label}: a name not a str added")
                continue
            was = before.pop(name, missing)
            if name in MODULE_NOISE or name in reported:
                continue
            if name in PYTEST_ADDS and pytests(space.get(name, missing)):
                continue
            if was is missing:
                suspect("runner-replaced", f"{label}.{name} added since pytest started")
            elif space.get(name, missing) is not was:
                suspect("runner-replaced", f"{label}.{name} replaced since pytest started")
        for name in before:
            if name not in MODULE_NOISE and name not in reported:
                suspect("runner-replaced", f"{label}.{name} deleted since pytest started")
        state[1], state[2] = list(space.values()), list(space)

    def pytests(value: Any) -> bool:
        """Whether `value` is one pytest itself sets (PYTEST_ADDS): True, or a function or
        property of code in pytest's files."""
        if value is True:
            return True
        code = _code(value)
        if code is None:
            return False
        kind, path = classify(code.co_filename)
        return kind == "site" and "/_pytest/" in path

    def on_setattr(event: str, args: tuple[Any, ...]) -> None:
        """A special attribute (``__bases__``, ``__name__``: the only ones of a class CPython
        audits; the rest are compared at every check) set on a key class, from anywhere
        outside pytest and the base's tests (through pytest's MonkeyPatch too); a
        function's code or defaults replaced, by any file of the tree."""
        if len(args) < 2:
            return
        target, name = args[0], _text(args[1])
        key = key_types.get(id(target))
        if key is not None and key[0] is target:
            found = actor(getframe(2), classify, "any", keepers)
            if found is None or found[0] == "test" or found[3]:
                return
            verb = "set" if event == "object.__setattr__" else "deleted"
            report("runner-replaced", f"{key[1]}.{name}: an attribute of pytest's {verb}", found)
            return
        what, detail, _, through, imports, names, _ = rules["object.__setattr__"]
        if event != "object.__setattr__" or name not in names:
            return
        if name != "__code__":
            # Defaults: of a function not the tree's own, nor built at run time (namedtuple's
            # `__new__`, whose defaults `namedtuple(defaults=...)` sets): pytest's, a library's.
            code = _code(target)
            if code is None or classify(code.co_filename)[0] in ("tree", "test", "unknown"):
                return
        found = actor(getframe(2), classify, through, keepers)
        if found is None or (found[3] and not imports):
            return
        report(what, detail.format(name=name), found)

    def on_outcome(args: tuple[Any, ...]) -> None:
        """A skip or an expected failure: whose code raised it. The traceback is walked
        from where it was raised outwards; the first frame of the tree decides: a test
        file's (the base's) is the test's own choice, the tree's non-test code is not
        (an old file of it counts when a changed file's code is further out)."""
        tb, name = args[0], _text(args[1]) or "an outcome exception"
        places: list[tuple[str, int]] = []
        if tb is not None:
            while tb is not None:
                places.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
                tb = tb.tb_next
            places.reverse()  # innermost first
        elif len(args) > 3 and _text(args[2]) is not None and type(args[3]) is exact_int:
            places.append((args[2], args[3]))  # a collection skip: where it was raised
        for at, (filename, line) in enumerate(places):
            kind, path = classify(filename)
            if kind == "test":
                return
            if kind not in ("tree", "unknown") or path in classify.trusted:
                continue
            if (
                kind == "tree"
                and changed is not None
                and not is_new(path, line, changed, new_lines)
            ):
                outer = [(classify(f), n) for f, n in places[at + 1 :]]
                if not any(k == "tree" and is_new(p, n, changed, new_lines) for (k, p), n in outer):
                    return  # the base's code, skipping as it did at the base
            suspect(OUTCOME["what"], OUTCOME["detail"].format(name=name), path, line)
            return

    def on_ours(event: str, args: tuple[Any, ...]) -> None:
        refused = refusal(getframe(2), classify)
        if event == "verifier.plugin":
            plugin, name = args[0], args[1]
            if refused is not None:
                kind, path, line = refused
                suspect(
                    "plugin-registered", f"plugin {name!r} registered from {kind} code", path, line
                )
                return
            approved.add(id(plugin))
            file = vars(plugin).get("__file__") if type(plugin) is module_type else None
            if type(file) is str:
                kind, rel = classify(file)
                if kind == "tree" and (changed is None or rel in changed):
                    # Named by the base's configuration, but written by the session.
                    suspect("plugin-changed", f"plugin {name!r} is a file the session changed", rel)
                elif kind == "tree":
                    classify.trusted.add(rel)  # named by the base's configuration
            return
        event_data = args[0] if args else None
        if type(event_data) is not dict:
            return
        if refused is not None:
            kind, path, line = refused
            suspect(
                "forged-line",
                f"a line of our reporter asked for from {kind} code",
                path if kind in ("tree", "unknown", "test") else "",
                line,
            )
            return
        said = event_data.get("event")
        if said == "start" and len(args) > 1 and not config_box:
            take_snapshot(args[1])
        elif said in ("report", "session_finish"):
            verify(said == "session_finish")
        seal(event_data)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "object.__getattr__":
            # The hottest event by far (every frame's f_code read, ours walking the stack
            # above all): an attribute name its rule does not list ends here, before any
            # other work. Only a plain str is judged here; anything else goes the long way.
            if len(args) > 1 and type(args[1]) is str and args[1] not in getattr_names:
                return
        elif event == "object.__setattr__" and len(args) > 1 and _text(args[1]) == "__code__":
            code_epoch[0] += 1  # whoever assigns it, ours or not: before anything returns
        if event not in watched:
            return
        tid = get_ident()
        if tid in busy:
            return  # an event of our own (sys._getframe below)
        busy.add(tid)
        try:
            if event in ("open", "os.listdir", "os.scandir"):
                on_open(event, args)
                return
            if event in ("verifier.send", "verifier.plugin"):
                on_ours(event, args)
                return
            if event == "verifier.outcome":
                on_outcome(args)
                return
            if event == "object.__setattr__" or event == "object.__delattr__":
                on_setattr(event, args)
                return
            what, detail, scope, through, imports, names, prefixes = rules[event]
            name = None
            if names:
                name = _text(args[1]) if len(args) > 1 else None
                if name not in names:
                    return
            elif prefixes:
                name = _text(args[0]) if args else None
                if name is None or not name.startswith(prefixes):
                    return
            elif event == "os.kill" and (not args or args[0] != get_pid()):
                return
            found = actor(getframe(1), classify, through, keepers)
            if found is None:
                return
            if found[0] == "test" and scope != "tree":
                return
            if found[3] and not imports:
                return
            report(what, detail.format(name=name), found)
        except Exception as exc:  # never let the hook break the run; say it failed
            seal({"event": "monitor_error", "error": f"{type(exc).__name__}: {exc}"})
        finally:
            busy.discard(tid)

    # The first line, while no code of the tree has run: the key the rest is sealed with.
    put(dumps({"event": "seal", "key": key.hex()}) + b"\n")
    sys.addaudithook(hook)
