"""verifier.checks.tests.results alone: JUnit and unittest results read from real files,
our pytest plugin's events and pytest's summary line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.channel import sealed
from verifier.checks.tests.results import (
    MAX_REPORT_BYTES,
    Channel,
    MonitorEvent,
    OutcomeCounts,
    UnreadableResults,
    count_junit,
    parse_pytest_summary,
    prepare_reports,
    read_bounded,
    read_junit_reports,
    read_pytest_events,
    read_unittest,
)

# What node v20's built-in junit reporter writes: no totals on <testsuites>, comments instead.
NODE_REPORT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites>
	<testcase name="adds" time="0.001" classname="test"/>
	<testcase name="skips" time="0.0001" classname="test">
		<skipped type="skipped" message="true"/>
	</testcase>
	<testcase name="fails" time="0.001" classname="test" failure="1 !== 2">
		<failure type="testCodeFailure" message="1 !== 2">stack</failure>
	</testcase>
	<testsuite name="group" time="0.0005" tests="1" failures="0" skipped="0">
		<testcase name="inner" time="0.0002" classname="test"/>
	</testsuite>
	<!-- tests 4 -->
	<!-- pass 2 -->
</testsuites>
"""


def test_node_report_is_counted_by_its_testcases() -> None:
    assert count_junit(NODE_REPORT) == OutcomeCounts(tests=4, failures=1, errors=0, skipped=1)
    assert count_junit(NODE_REPORT).to_dict() == {
        "passed": 2,
        "failed": 1,
        "errors": 0,
        "skipped": 1,
    }


def test_an_error_counts_once_even_beside_a_failure() -> None:
    xml = b"<testsuite><testcase name='a'><failure/><error/></testcase></testsuite>"
    assert count_junit(xml) == OutcomeCounts(tests=1, failures=0, errors=1, skipped=0)


def test_a_single_testcase_document_is_a_report() -> None:
    assert count_junit(b"<testcase name='alone'/>").tests == 1


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"5 passed", "not XML"),
        (b"<html><body>ok</body></html>", "root element is <html>"),
        (
            b'<!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
            b"<testsuite><testcase name='&b;'/></testsuite>",
            "refused XML",
        ),
        (
            b'<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b"<testsuite><testcase name='&x;'/></testsuite>",
            "refused XML",
        ),
    ],
    ids=["text", "html", "entity-expansion", "external-entity"],
)
def test_what_is_not_a_safe_junit_report_is_refused(data: bytes, reason: str) -> None:
    with pytest.raises(UnreadableResults, match=reason):
        count_junit(data)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "report.xml"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableResults, match="not a regular file"):
        read_bounded(fifo, 100)


def test_a_file_over_the_bound_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.xml"
    big.write_bytes(b"x" * 101)
    with pytest.raises(UnreadableResults, match="over the 100 byte limit"):
        read_bounded(big, 100)


def test_prepare_removes_committed_reports_and_creates_the_fixed_folders(tmp_path: Path) -> None:
    (tmp_path / "reports" / "sub").mkdir(parents=True)
    (tmp_path / "reports" / "old.xml").write_text("<testsuite/>")
    (tmp_path / "reports" / "keep.txt").write_text("notes")
    (tmp_path / "reports" / "sub" / "deep.xml").write_text("<testsuite/>")

    removed = prepare_reports(tmp_path, ["reports/**/*.xml", "build/test-results/*/TEST-*.xml"])

    assert removed == ["reports/old.xml", "reports/sub/deep.xml"]
    assert sorted(p.name for p in (tmp_path / "reports").rglob("*")) == ["keep.txt", "sub"]
    assert (tmp_path / "build" / "test-results").is_dir()


def test_reports_are_summed_and_folders_that_match_are_passed_over(tmp_path: Path) -> None:
    (tmp_path / "r" / "a.xml").parent.mkdir()
    (tmp_path / "r" / "a.xml").write_text("<testsuite><testcase name='a'/></testsuite>")
    (tmp_path / "r" / "b.xml").write_text(
        "<testsuite><testcase name='b'><failure/></testcase></testsuite>"
    )
    (tmp_path / "r" / "dir.xml").mkdir()

    counts, files = read_junit_reports(tmp_path, ["r/*.xml"])

    assert files == ["r/a.xml", "r/b.xml"]
    assert counts == OutcomeCounts(tests=2, failures=1, errors=0, skipped=0)


def test_a_report_reached_through_a_linked_folder_is_refused(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "copy", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (elsewhere / "a.xml").write_text("<testsuite><testcase name='a'/></testsuite>")
    (root / "reports").symlink_to(elsewhere)

    with pytest.raises(UnreadableResults, match=r"reports/a\.xml: the folder 'reports'"):
        read_junit_reports(root, ["reports/*.xml"])
    assert prepare_reports(root, ["reports/*.xml"]) == []  # not removed through the link
    assert (elsewhere / "a.xml").exists()


def test_no_matching_file_says_which_globs(tmp_path: Path) -> None:
    with pytest.raises(UnreadableResults, match=r"no file matches \['reports/\*.xml'\]"):
        read_junit_reports(tmp_path, ["reports/*.xml"])


def test_the_reports_of_a_run_share_one_byte_bound(tmp_path: Path) -> None:
    half = b"<testsuite>" + b" " * (MAX_REPORT_BYTES // 2) + b"</testsuite>"
    (tmp_path / "a.xml").write_bytes(half)
    (tmp_path / "b.xml").write_bytes(half)
    with pytest.raises(UnreadableResults, match="byte limit for all the reports"):
        read_junit_reports(tmp_path, ["*.xml"])


@pytest.mark.parametrize("glob", ["../x.xml", "/etc/*.xml", "a/../../x.xml", ""])
def test_a_glob_outside_the_copy_is_a_programming_error(tmp_path: Path, glob: str) -> None:
    with pytest.raises(ValueError, match="not a relative path inside the copy"):
        read_junit_reports(tmp_path, [glob])


def test_unittest_counts_are_read(tmp_path: Path) -> None:
    path = tmp_path / "unittest.json"
    keys = ["tests_run", "failures", "errors", "skipped", "expected_failures"]
    path.write_text(json.dumps({**dict.fromkeys(keys, 1), "unexpected_successes": 0}))

    assert read_unittest(path) == OutcomeCounts(1, 1, 1, 1, 1, 0)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[1]", "not a JSON object"),
        ("{", "not JSON"),
        ('{"tests_run": "3"}', "tests_run='3'"),
        ('{"tests_run": -1}', "tests_run=-1"),
        (
            '{"tests_run": 1, "failures": 0, "errors": 0, "skipped": 0, "expected_failures": 0,'
            ' "unexpected_successes": true}',
            "unexpected_successes=True",
        ),
    ],
)
def test_a_unittest_result_that_is_not_counts_is_refused(
    tmp_path: Path, text: str, reason: str
) -> None:
    path = tmp_path / "unittest.json"
    path.write_text(text)
    with pytest.raises(UnreadableResults, match=reason):
        read_unittest(path)


def test_a_missing_unittest_result_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UnreadableResults, match="no such file"):
        read_unittest(tmp_path / "unittest.json")


# Reading our pytest plugin's channel and pytest's summary line -----------------------------


def test_the_summary_line_is_read_in_every_form_pytest_prints_it() -> None:
    loud = "x\n===== 1 failed, 2 passed, 3 warnings, 1 error in 0.12s (0:00:00) =====\n"
    coloured = "\x1b[32m\x1b[1m2 passed\x1b[0m\x1b[32m in 0.01s\x1b[0m\n"
    assert parse_pytest_summary(loud) == {
        "passed": 2, "failed": 1, "error": 1, "skipped": 0, "xfailed": 0, "xpassed": 0
    }  # fmt: skip
    assert parse_pytest_summary(coloured)["passed"] == 2  # type: ignore[index]
    assert parse_pytest_summary("no tests ran in 0.01s\n") == dict.fromkeys(
        ("passed", "failed", "error", "skipped", "xfailed", "xpassed"), 0
    )
    # The last summary line counts: one printed after pytest's own is what is compared.
    assert parse_pytest_summary("2 passed in 0.1s\n7 passed in 0.01s\n")["passed"] == 7  # type: ignore[index]
    assert parse_pytest_summary("ok\n2 passed, and that is all\n") is None


def test_channel_lines_cut_short_unknown_or_after_the_end_are_problems() -> None:
    report = (
        b'{"event":"report","nodeid":"t::a","when":"call","outcome":"passed","category":"passed"}'
    )
    finish = b'{"event":"session_finish","exitstatus":0}'

    clean = read_pytest_events(sealed(report, finish))
    assert (clean.exitstatus, clean.problem, clean.counts.tests) == (0, None, 1)
    assert read_pytest_events(sealed(report, finish, report)).problem == (
        "line 4: an event after the session finished"
    )
    assert read_pytest_events(sealed(b"junk", report, finish)).problem == (
        "line 2 is not an event of our plugin"
    )
    cut = read_pytest_events(sealed(report, finish)[:-5])
    assert cut.exitstatus is None
    assert cut.problem is not None and "cut short" in cut.problem


def test_a_line_not_sealed_by_the_monitor_is_a_problem_and_ends_what_is_read() -> None:
    report = (
        b'{"event":"report","nodeid":"t::a","when":"call","outcome":"passed","category":"passed"}'
    )
    finish = b'{"event":"session_finish","exitstatus":0}'
    good = sealed(report, finish)
    forged = good.split(b"\n")
    forged[1] = b"0" * 32 + b" " + report  # the right bytes, a MAC made without the key
    dropped = sealed(report, finish).split(b"\n")
    del dropped[1]  # the report's line dropped: the finish line's number is now wrong

    assert read_pytest_events(b"\n".join(forged)).problem == "line 2 is not an event of our plugin"
    assert read_pytest_events(b"\n".join(dropped)).problem == "line 2 is not an event of our plugin"
    unsealed = read_pytest_events(report + b"\n" + finish + b"\n")
    assert unsealed.problem == "line 1 is not the monitor's seal"
    assert unsealed.exitstatus is None


def test_the_monitor_events_are_read_apart_from_the_plugin_events() -> None:
    finish = {"event": "session_finish", "exitstatus": 0}
    seen = {"event": "monitor", "what": "frame-walk", "file": "calc.py", "line": 3, "detail": "x"}
    data = {"event": "data_read", "file": "data/a.csv", "by": "tests/test_a.py", "line": 7}

    run = read_pytest_events(sealed(finish, seen, data))

    assert (run.problem, run.events, run.exitstatus) == (None, 1, 0)
    assert run.monitor == (
        MonitorEvent("frame-walk", "calc.py", 3, "x"),
        MonitorEvent("data_read", "data/a.csv", 7, "", by="tests/test_a.py"),
    )


def test_a_teardown_error_after_a_failed_call_is_a_case_of_its_own_as_in_junit() -> None:
    lines = [
        {"event": "report", "nodeid": "t::a", "when": "call", "outcome": "failed"},
        {"event": "report", "nodeid": "t::a", "when": "teardown", "outcome": "failed"},
        {"event": "report", "nodeid": "t::b", "when": "setup", "outcome": "skipped"},
    ]
    run = read_pytest_events(sealed(*lines))

    assert run.counts.to_dict() == {"passed": 0, "failed": 1, "errors": 1, "skipped": 1}
    assert run.counts.tests == 3


def test_the_channel_reads_a_writer_of_many_small_lines_whole_and_in_batches() -> None:
    """A run writes its events a line at a time, as the tests go; the channel keeps every
    byte, in order, reading its enlarged pipe in batches (each read that empties the pipe
    waits for more lines to gather: reading at each line woke this process 2,000 times
    here), and stops at its bound, saying so."""
    lines = 20_000
    script = (
        "import os, sys, time\n"
        "fd = int(sys.argv[1])\n"
        f"for i in range({lines}):\n"
        "    os.write(fd, b'%06d {}\\n' % i)\n"
        "    if i % 10 == 0: time.sleep(0.001)\n"
    )
    expected = b"".join(b"%06d {}\n" % i for i in range(lines))
    for limit in (MAX_REPORT_BYTES, 1000):
        read_fd, write_fd = os.pipe()
        channel = Channel(read_fd, limit=limit)
        writer = subprocess.Popen(
            [sys.executable, "-c", script, str(write_fd)], pass_fds=[write_fd]
        )
        os.close(write_fd)
        assert writer.wait(120) == 0
        data = channel.close(wait_s=30)
        if limit == MAX_REPORT_BYTES:
            assert data == expected and not channel.overflowed
            assert channel.capacity >= 1 << 16
            assert channel.reads < 1000, channel.reads  # 2,000 pauses of the writer
        else:
            assert data == expected[:1000] and channel.overflowed


def test_the_channel_wakes_seldom_for_a_slow_writer_and_ends_with_it() -> None:
    """A suite of slow tests writes a line now and then: after a read of a few bytes the
    channel waits `IDLE_S`, not `BATCH_S` (a read at every line, 50 a second), and
    `close` ends that wait at once: every line is there."""
    lines = 60
    script = (
        "import os, sys, time\n"
        "fd = int(sys.argv[1])\n"
        f"for i in range({lines}):\n"
        "    os.write(fd, b'%06d {}\\n' % i)\n"
        "    time.sleep(0.02)\n"
    )
    read_fd, write_fd = os.pipe()
    channel = Channel(read_fd)
    writer = subprocess.Popen([sys.executable, "-c", script, str(write_fd)], pass_fds=[write_fd])
    os.close(write_fd)
    assert writer.wait(120) == 0
    data = channel.close(wait_s=30)
    assert data == b"".join(b"%06d {}\n" % i for i in range(lines))
    # A read at each line, each followed by a wait of BATCH_S, is about `lines` reads.
    assert channel.reads < lines / 2, channel.reads
