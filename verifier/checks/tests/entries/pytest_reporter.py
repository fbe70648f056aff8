"""Our pytest plugin: each test's outcome, as it finishes, on a pipe only the verifier reads.

Loaded by our entry (`pytest_entry.py`) as a plugin object, never found by name, so a
repository cannot shadow it. Standard library and pytest's hooks only: it runs with
whatever pytest the configured interpreter has.

`channel(fd)` is called by the entry before pytest starts, with the write end of
a pipe the verifier made and passed to the child (its read end stays with the
verifier, which reads while the run goes). The descriptor is made
non-inheritable, so processes the tests start do not get it. One JSON object a
line:

* ``{"event": "start", "pytest": "<version>"}`` when pytest is configured;
* ``{"event": "report", "nodeid", "when", "outcome", "category", "counts"}``
  for every report pytest makes: ``when`` is ``collect``, ``setup``, ``call``
  or ``teardown``, ``outcome`` pytest's (``passed``, ``failed``, ``skipped``),
  ``category`` what the terminal's summary counts it as (``passed``,
  ``failed``, ``error``, ``skipped``, ``xfailed``, ``xpassed``, ``""``), and
  ``counts`` whether it counts towards that summary;
* ``{"event": "session_finish", "exitstatus": <n>}`` once the session ended,
  after every other plugin's session-finish hook.

What this stops: a result rewritten after the fact (the JUnit file from an
``atexit`` hook), a run that ends early through ``os._exit``, a signal or a
crash (no ``session_finish``), an exit status changed after the session
(``session_finish`` says otherwise). What it does not stop: the code under test
runs in this process and can find the descriptor (``/proc/self/fd``), write
lines of its own, or patch pytest or this plugin before any test reports. The
verifier treats lines it cannot read, and lines after ``session_finish``, as a
disagreement, so forging costs a full, consistent imitation.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_fd: list[int] = []


def channel(fd: int) -> None:
    """Write the events to `fd` (a pipe's write end), which no child process inherits."""
    os.set_inheritable(fd, False)
    _fd[:] = [fd]


def _send(event: dict[str, Any]) -> None:
    if not _fd:
        return  # no channel: a worker process of pytest-xdist, or a run by hand
    data = (json.dumps(event, separators=(",", ":")) + "\n").encode("utf-8", "backslashreplace")
    view = memoryview(data)
    while view:
        try:
            written = os.write(_fd[0], view)
        except OSError:
            _fd.clear()  # the verifier is gone: nothing left to tell
            return
        view = view[written:]


_configs: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _configs[:] = [config]
    _send({"event": "start", "pytest": pytest.__version__})


def _report(report: pytest.CollectReport | pytest.TestReport, config: pytest.Config) -> None:
    status = config.hook.pytest_report_teststatus(report=report, config=config)
    category = status[0] if isinstance(status, tuple) and status else ""
    _send(
        {
            "event": "report",
            "nodeid": report.nodeid,
            "when": getattr(report, "when", None) or "collect",
            "outcome": report.outcome,
            "category": category if isinstance(category, str) else str(category),
            "counts": bool(getattr(report, "count_towards_summary", True)),
        }
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A passed setup or teardown tells nothing the call's report does not: the test
    # is known by its call, and neither counts in the summary. Two lines in three
    # saved on a long suite.
    if _configs and (report.when == "call" or report.outcome != "passed"):
        _report(report, _configs[0])


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # Only what the summary and the JUnit report count: a collection error or skip.
    if report.outcome != "passed" and _configs:
        _report(report, _configs[0])


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Any:
    yield
    _send({"event": "session_finish", "exitstatus": int(session.exitstatus)})
