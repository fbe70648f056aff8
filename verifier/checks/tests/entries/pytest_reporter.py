"""Our pytest plugin: each test's outcome, as it finishes, on a pipe only the verifier reads.

Loaded by our entry (`pytest_entry.py`) as a plugin object, never found by name, so a
repository cannot shadow it. Standard library and pytest's hooks only: it runs with
whatever pytest the configured interpreter has.

`channel()` is called by the entry before pytest starts, once the monitor
(`monitor.py`) holds the write end of a pipe the verifier made and passed to the
child (its read end stays with the verifier, which reads while the run goes).
Every line goes through the monitor (``sys.audit("verifier.send", ...)``), which
seals it and refuses it when the tree's code is on the stack; this module keeps
nothing the tree could use to write one. One JSON object a line:

* ``{"event": "start", "pytest": "<version>"}`` when pytest is configured;
* ``{"event": "report", "nodeid", "when", "outcome", "category", "counts"}``
  for every report pytest makes: ``when`` is ``collect``, ``setup``, ``call``
  or ``teardown``, ``outcome`` pytest's (``passed``, ``failed``, ``skipped``),
  ``category`` what the terminal's summary counts it as (``passed``,
  ``failed``, ``error``, ``skipped``, ``xfailed``, ``xpassed``, ``""``), and
  ``counts`` whether it counts towards that summary;
* ``{"event": "session_finish", "exitstatus": <n>}`` once the session ended,
  after every other plugin's session-finish hook.

When the entry's spec names ``select`` (test ids: the verifier reruns failed tests),
every collected item not among them is deselected, last of the plugins that modify
the collection.

With each report and at the session's end the monitor checks that pytest's
machinery is what it was at the start (``monitor.KEY_OBJECTS``, ``KEY_HOOKS``);
it hears of each plugin pytest registers from `pytest_plugin_registered`.

What it stops: a result rewritten after the fact (the JUnit file from an
``atexit`` hook), a run that ends early through ``os._exit``, a signal or a
crash (no ``session_finish``), an exit status changed after the session
(``session_finish`` says otherwise), a line forged or dropped on the channel
(the seal). The verifier treats lines it cannot read, and lines after
``session_finish``, as a disagreement.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

_on: list[bool] = []


def channel() -> None:
    """Send the events: the monitor holds the channel (none in a worker of pytest-xdist)."""
    _on[:] = [True]


def _send(event: dict[str, Any], config: Any = None) -> None:
    if _on:
        if config is None:
            sys.audit("verifier.send", event)
        else:
            sys.audit("verifier.send", event, config)


def pytest_plugin_registered(plugin: Any, manager: Any) -> None:
    # Historic: called for every plugin registered before us too.
    if _on:
        sys.audit("verifier.plugin", plugin, manager.get_name(plugin))


_configs: list[pytest.Config] = []
# The test ids to run, when the verifier reruns failed tests by id: every other item is
# deselected once collected (the command, its configuration and collection unchanged).
_select: list[frozenset[str]] = []


def select(ids: Any) -> None:
    """Run only the tests of `ids` (node ids), as the entry read them from its spec."""
    _select[:] = [frozenset(str(i) for i in ids)]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _select:
        return
    wanted = _select[0]
    dropped = [item for item in items if item.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item.nodeid in wanted]


def pytest_configure(config: pytest.Config) -> None:
    _configs[:] = [config]
    _send({"event": "start", "pytest": pytest.__version__}, config)


# The last answer of `pytest_report_teststatus`, with the report it was for: the terminal
# asks it for every report just before us, so that answer is what its summary counts, and
# asking again would cost a second call of the hook at every report (about 15 µs).
_status: list[tuple[Any, Any]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_report_teststatus(report: Any, config: pytest.Config) -> Any:
    outcome = yield
    if outcome.excinfo is None:
        _status[:] = [(report, outcome.get_result())]


def _report(report: pytest.CollectReport | pytest.TestReport, config: pytest.Config) -> None:
    known = _status[0] if _status else None
    _status.clear()
    if known is not None and known[0] is report:
        status = known[1]
    else:  # no terminal asked (``-p no:terminal``), or not last: ask ourselves
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


def _outcome_exceptions() -> tuple[type[BaseException], ...]:
    kinds: list[type[BaseException]] = [pytest.skip.Exception, pytest.xfail.Exception]
    unittest = sys.modules.get("unittest")
    if unittest is not None:
        kinds.append(unittest.SkipTest)
    return tuple(kinds)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Before any implementation turns it into a report (unittest's SkipTest becomes a
    # pytest skip raised by pytest): the monitor says whose code raised it.
    excinfo = call.excinfo
    if _on and excinfo is not None and isinstance(excinfo.value, _outcome_exceptions()):
        sys.audit("verifier.outcome", excinfo.tb, type(excinfo.value).__name__, None, None)
    yield


@pytest.hookimpl(trylast=True)  # after the terminal's, whose question we reuse
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A passed setup or teardown tells nothing the call's report does not: the test
    # is known by its call, and neither counts in the summary. Two lines in three
    # saved on a long suite.
    if _configs and (report.when == "call" or report.outcome != "passed"):
        _report(report, _configs[0])


@pytest.hookimpl(trylast=True)
def pytest_collectreport(report: pytest.CollectReport) -> None:
    # Only what the summary and the JUnit report count: a collection error or skip.
    if report.outcome != "passed" and _configs:
        _report(report, _configs[0])
    longrepr = report.longrepr
    if _on and report.outcome == "skipped" and isinstance(longrepr, tuple) and len(longrepr) == 3:
        # A module skipped while it was collected: where the skip was raised.
        path, line = str(longrepr[0]), longrepr[1]
        if isinstance(line, int):
            sys.audit("verifier.outcome", None, "a skip", os.path.abspath(path), line)


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Any:
    yield
    _send({"event": "session_finish", "exitstatus": int(session.exitstatus)})
