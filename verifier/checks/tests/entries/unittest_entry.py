"""Run unittest as ``python -m unittest ARGS`` would, and write what it counted as JSON.

The tests check runs ``PYTHON _unittest_entry.py FD ARGS...`` in place of a
configured ``PYTHON -m unittest ARGS...``, with the repository's own interpreter,
so it uses the standard library only and must run on any Python 3 the
repository has. unittest's text output is unchanged; its counts (tests run,
failures, errors, skipped, expected failures, unexpected successes) are written
as one JSON line, when the run stops, to the descriptor FD: a pipe whose read
end only the verifier holds (`verifier.checks.tests.results.unittest_counts`), so they
cannot be rewritten after the fact the way a file could. "Ran 0 tests" then is
a number we read rather than a line we would parse. The descriptor is not
inherited by processes the tests start; the code under test, in this process,
can still find it and write to it, which the verifier sees as a second line.

The exit status is unittest's own. When unittest stops before running anything
(bad arguments, an import error in a named module) nothing is written.

unittest reads no configuration file and loads no plugins: the command configures
it. What the entry adds is that no bytecode of the tree runs (`_source_only`): a
module of the tree is compiled from the source that was hashed and scanned, and a
sourceless ``.pyc`` is not importable. The guarantee is weaker than pytest's: as
under ``-m unittest`` the working folder (and discovery's top folder) comes first on
the path, so the tree may shadow a standard-library module unittest imports late.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import sys
import unittest
from typing import Any

_results: list[unittest.TestResult] = []


class _RecordingResult(unittest.TextTestResult):
    """unittest's own text result, kept when the run ends."""

    def stopTestRun(self) -> None:
        super().stopTestRun()
        _results.append(self)


class _RecordingRunner(unittest.TextTestRunner):
    """unittest's own runner (unittest.main builds it with the options of ARGS)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["resultclass"] = _RecordingResult
        super().__init__(*args, **kwargs)


def _counts(result: unittest.TestResult) -> dict[str, int]:
    return {
        "tests_run": result.testsRun,
        "failures": len(result.failures),
        "errors": len(result.errors),
        "skipped": len(result.skipped),
        "expected_failures": len(result.expectedFailures),
        "unexpected_successes": len(result.unexpectedSuccesses),
    }


def _inside(path: str, root: str) -> bool:
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Python's loader of source files, which never reads bytecode inside `root`."""

    root = ""

    def get_data(self, path: str) -> bytes:
        suffixes = tuple(importlib.machinery.BYTECODE_SUFFIXES)
        if path.endswith(suffixes) and _SourceOnlyLoader.root and _inside(path, self.root):
            raise OSError(f"{path}: bytecode of the tree under test is not read")
        return super().get_data(path)


def _source_only(root: str) -> None:
    """Every folder's finder from now on: extension modules and sources, no sourceless
    ``.pyc`` (as in `pytest_entry.py`, which this script may not import)."""
    machinery = importlib.machinery
    _SourceOnlyLoader.root = os.path.realpath(root)
    hook = machinery.FileFinder.path_hook(
        (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
        (_SourceOnlyLoader, machinery.SOURCE_SUFFIXES),
    )
    sys.path_hooks[:] = [
        hook if "FileFinder" in getattr(h, "__qualname__", "") else h for h in sys.path_hooks
    ]
    sys.path_importer_cache.clear()


def _monitor(folder: str) -> Any:
    """The monitor (`monitor.py` beside this file), kept out of ``sys.modules``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_verifier_monitor", f"{folder}/monitor.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    fd, args = int(sys.argv[1]), sys.argv[2:]
    os.set_inheritable(fd, False)
    folder = os.path.dirname(os.path.abspath(__file__))
    monitored = os.path.exists(os.path.join(folder, "monitor.py"))
    _source_only(os.getcwd())
    if monitored:  # the monitor, before any file of the tree is importable
        _monitor(folder).install(fd, folder)
    # As `-m` does: the working folder, not this script's, comes first on the path.
    sys.path[0] = os.getcwd()
    sys.argv = ["python -m unittest", *args]
    status: Any = 0
    try:
        unittest.main(module=None, argv=sys.argv, testRunner=_RecordingRunner)
    except SystemExit as exc:
        status = exc.code
    if _results and monitored:
        sys.audit("verifier.send", _counts(_results[-1]))  # the monitor seals it
    elif _results:
        data = memoryview((json.dumps(_counts(_results[-1])) + "\n").encode())
        while data:
            data = data[os.write(fd, data) :]
    sys.exit(status)


if __name__ == "__main__":
    main()
