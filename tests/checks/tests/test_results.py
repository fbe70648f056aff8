"""verifier.checks.tests.results alone: JUnit and unittest results read from real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from verifier.checks.tests.results import (
    MAX_REPORT_BYTES,
    OutcomeCounts,
    UnreadableResults,
    count_junit,
    prepare_reports,
    read_bounded,
    read_junit_reports,
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
