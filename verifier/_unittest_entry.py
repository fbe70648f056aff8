"""Run unittest as ``python -m unittest ARGS`` would, and write what it counted as JSON.

The tests check runs ``PYTHON _unittest_entry.py RESULT ARGS...`` in place of a
configured ``PYTHON -m unittest ARGS...``, with the repository's own interpreter,
so it uses the standard library only and must run on any Python 3 the
repository has. unittest's text output is unchanged; its counts (tests run,
failures, errors, skipped, expected failures, unexpected successes) go to the
file RESULT, outside the copy, where the check reads them (`verifier.results`):
"Ran 0 tests" then is a number we read rather than a line we would parse.

The exit status is unittest's own. When unittest stops before running anything
(bad arguments, an import error in a named module) no RESULT is written.
"""

from __future__ import annotations

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


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    # As `-m` does: the working folder, not this script's, comes first on the path.
    sys.path[0] = os.getcwd()
    sys.argv = ["python -m unittest", *args]
    status: Any = 0
    try:
        unittest.main(module=None, argv=sys.argv, testRunner=_RecordingRunner)
    except SystemExit as exc:
        status = exc.code
    if _results:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(_counts(_results[-1]), fh)
    sys.exit(status)


if __name__ == "__main__":
    main()
