"""Bounds on what a report can cost: its size while streaming, its item counts, its findings."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.report_load import build
from tests.support.gitrepo import GitRepo
from tests.support.report_factory import report_dict
from tests.support.sessions import config_toml, fixed_session, to_bytes
from verifier.app.pipeline import KEPT_BYTES, Oversized, read_report, submit, verify_report
from verifier.config import Config
from verifier.contract.report import Limits, parse_document, parse_report
from verifier.errors import InvalidReport
from verifier.findings import CheckResult, Finding, cap_findings
from verifier.store import Store


class _Zeros(io.RawIOBase):
    """`size` zero bytes, produced as they are read: nothing holds the whole stream."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def _with_items(where: str, item: str, n: int, pad: int = 0) -> bytes:
    """A valid minimal report whose list at `where` holds `n` copies of `item`."""
    data = report_dict(task="x" * pad)
    if where == "changes":
        data["changes"] = "@@"
    elif where == "contents":
        data["trajectory"]["contents"] = "@@"
    else:
        data["audit"]["entries"] = "@@"
    return json.dumps(data).replace('"@@"', "[" + ",".join([item] * n) + "]").encode()


def _parse_peak(raw: bytes) -> tuple[int, InvalidReport | None]:
    """Peak Python memory parse_document allocates for `raw`, and the error it raised."""
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        error = None
        try:
            parse_document(raw)
        except InvalidReport as exc:
            error = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - start, error


# --- size, while streaming ---------------------------------------------------------------


def test_a_report_at_the_limit_is_read_whole() -> None:
    raw = b"x" * 1000
    assert read_report(io.BytesIO(raw), 1000) == raw


def test_a_report_one_byte_over_the_limit_keeps_its_head_size_and_hash() -> None:
    raw = bytes(range(256)) * 400 + b"!"  # 102,401 bytes
    got = read_report(io.BytesIO(raw), len(raw) - 1)
    assert isinstance(got, Oversized)
    assert got.head == raw[:KEPT_BYTES]
    assert (got.size, got.sha256) == (len(raw), hashlib.sha256(raw).hexdigest())
    error = got.error()
    assert error.field == "$"
    assert f"{len(raw)} bytes" in error.problem and f"limit of {len(raw) - 1}" in error.problem


def test_an_oversized_stream_is_hashed_without_being_held() -> None:
    size, limit = 64 << 20, 1 << 20
    tracemalloc.start()
    try:
        got = read_report(io.BufferedReader(_Zeros(size)), limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(got, Oversized)
    assert got.size == size
    assert got.sha256 == hashlib.sha256(bytes(size)).hexdigest()
    assert peak < 4 * limit  # the limit and a chunk, never the 64 MiB


def test_submit_keeps_only_the_first_bytes_of_an_oversized_report(tmp_path: Path) -> None:
    raw = to_bytes(report_dict(task="y" * 200_000))
    with (
        Store.open(f"sqlite:///{tmp_path / 'db.sqlite3'}") as store,
        pytest.raises(InvalidReport, match="over the limit of 100000 bytes"),
    ):
        submit(store, raw, "big.json", max_report_bytes=100_000)
    with sqlite3.connect(tmp_path / "db.sqlite3") as conn:
        kept, digest, size = conn.execute(
            "select report, report_sha256, report_size from rejected_reports"
        ).fetchone()
    assert kept == raw[:KEPT_BYTES]
    assert (digest, size) == (hashlib.sha256(raw).hexdigest(), len(raw))


def test_a_rejected_report_under_the_limit_is_kept_whole_with_its_size(tmp_path: Path) -> None:
    raw = b'{"schema_version": "1"}'
    with Store.open(f"sqlite:///{tmp_path / 'db.sqlite3'}") as store, pytest.raises(InvalidReport):
        submit(store, raw, "small.json")
    with sqlite3.connect(tmp_path / "db.sqlite3") as conn:
        kept, size = conn.execute("select report, report_size from rejected_reports").fetchone()
    assert (kept, size) == (raw, len(raw))


def test_verify_report_refuses_bytes_over_the_configured_limit(tmp_path: Path) -> None:
    config = Config.from_mapping({"verifier": {"max_report_bytes": 1000}})
    with pytest.raises(InvalidReport, match="over the limit of 1000 bytes"):
        verify_report(to_bytes(report_dict(task="z" * 2000)), config, store=False)


def test_cli_verify_refuses_an_oversized_report_from_stdin_and_keeps_its_head(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config_toml(tmp_path, repo)
    cfg.write_text(cfg.read_text().replace("[verifier]", "[verifier]\nmax_report_bytes = 4096"))
    report = fixed_session(repo).report()
    report["task"] = "w" * 100_000
    raw = to_bytes(report)
    done = subprocess.run(
        [sys.executable, "-m", "verifier", "verify", "-", "--config", str(cfg)],
        input=raw,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert f"report is {len(raw)} bytes, over the limit of 4096 bytes" in done.stderr.decode()
    with sqlite3.connect(tmp_path / "store.sqlite3") as conn:
        kept, digest, size = conn.execute(
            "select report, report_sha256, report_size from rejected_reports"
        ).fetchone()
    assert kept == raw[:KEPT_BYTES]
    assert (digest, size) == (hashlib.sha256(raw).hexdigest(), len(raw))


# --- item counts, before validation ------------------------------------------------------

SMALL = Limits(changes=10, contents=10, parts=30, audit_entries=10)


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("changes", "changes"),
        ("contents", "trajectory.contents"),
        ("entries", "audit.entries"),
    ],
)
def test_a_list_over_its_cap_is_refused_naming_the_field(where: str, field: str) -> None:
    with pytest.raises(InvalidReport) as info:
        parse_document(_with_items(where, "{}", 11), SMALL)
    assert info.value.field == field
    assert "holds 11 items, over the limit of 10" in info.value.problem


def test_parts_are_capped_across_all_contents() -> None:
    content = '{"role":"user","parts":[{"text":"a"},{"text":"b"},{"text":"c"},{"text":"d"}]}'
    parse_document(_with_items("contents", content, 7), SMALL)  # 28 parts: within
    with pytest.raises(InvalidReport) as info:
        parse_document(_with_items("contents", content, 8), SMALL)
    assert info.value.field == "trajectory.contents"
    assert "32 parts in all, over the limit of 30" in info.value.problem


def test_brackets_inside_strings_do_not_count_as_containers() -> None:
    raw = to_bytes(report_dict(task="{[" * 100_000))
    assert parse_document(raw).doc.task == "{[" * 100_000


def test_too_many_containers_for_the_size_are_refused_before_parsing() -> None:
    with pytest.raises(InvalidReport) as info:
        parse_document(_with_items("entries", "[]", 50_000))
    assert info.value.field == "$"
    assert "JSON objects and arrays" in info.value.problem


def test_a_non_object_entry_is_still_refused_naming_the_list() -> None:
    with pytest.raises(InvalidReport) as info:
        parse_document(_with_items("entries", '"text"', 3))
    assert info.value.field == "audit.entries"
    assert "item 0: expected an object, got str" in info.value.problem


@pytest.mark.parametrize("where", ["changes", "contents", "entries"])
def test_two_megabytes_of_empty_objects_cost_less_than_twenty_times_their_size(
    where: str,
) -> None:
    raw = _with_items(where, "{}", 2_000_000 // 3)
    peak, error = _parse_peak(raw)
    assert error is not None
    assert peak < 20 * len(raw), f"{peak} bytes for a {len(raw)} byte report"


@pytest.mark.parametrize("where", ["changes", "contents", "entries"])
def test_empty_objects_under_the_container_limit_stop_at_the_count_cap(where: str) -> None:
    # 150,000 `{}` padded to 2 MB: few enough containers for the size, too many items.
    raw = _with_items(where, "{}", 150_000, pad=1_600_000)
    peak, error = _parse_peak(raw)
    assert error is not None and "over the limit of 100000" in error.problem
    assert peak < 20 * len(raw), f"{peak} bytes for a {len(raw)} byte report"


def test_an_honest_dense_report_parses_under_twenty_times_its_size() -> None:
    call = (
        '{"role":"model","parts":[{"functionCall":{"name":"read_file","args":{"path":"calc.py"}}}]}'
    )
    raw = _with_items("contents", call, 20_000)
    peak, error = _parse_peak(raw)
    assert error is None
    assert peak < 20 * len(raw), f"{peak} bytes for a {len(raw)} byte report"


def _load_peak(raw: bytes) -> int:
    """Peak Python memory `parse_report` allocates for `raw`, trajectory included.

    A first parse outside the measure imports the SDK and fills the caches
    (validators, field maps), which are paid once per process, not per report.
    """
    parse_report(raw)
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        report = parse_report(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.trajectory.calls
    return peak - start


def test_an_honest_report_loads_with_its_trajectory_under_twenty_times_its_size() -> None:
    # The benchmark's report: 1,000 calls of file text, searches, edits and
    # command output, 1.7 MB; about 5 times its size.
    raw = build(1_000)
    peak = _load_peak(raw)
    assert peak < 20 * len(raw), f"{peak} bytes for a {len(raw)} byte report"


def test_a_dense_trajectory_does_not_keep_its_raw_turns_beside_the_sdk_objects() -> None:
    # 20,000 calls of 90 bytes: the SDK's objects alone cost about 20 times
    # that (a `Part` holds 20 fields); with the raw JSON of every turn kept
    # beside them, loading cost 37 times the size, now about 26.
    call = (
        '{"role":"model","parts":[{"functionCall":{"name":"read_file","args":{"path":"calc.py"}}}]}'
    )
    raw = _with_items("contents", call, 20_000)
    peak = _load_peak(raw)
    assert peak < 30 * len(raw), f"{peak} bytes for a {len(raw)} byte report"


# --- findings, per code ------------------------------------------------------------------


def _result(codes: dict[str, int]) -> CheckResult:
    findings = [
        Finding(code, f"{code} #{n}", path=f"f{n}") for code, k in codes.items() for n in range(k)
    ]
    return CheckResult.from_findings("changes", findings)


def test_findings_over_the_cap_are_counted_in_the_last_one_kept() -> None:
    capped = cap_findings(_result({"change.undeclared": 120, "change.missing": 3}), per_code=50)
    undeclared = [f for f in capped.findings if f.code == "change.undeclared"]
    assert len(undeclared) == 50
    assert undeclared[-1].message == "change.undeclared #49 (and 70 more change.undeclared)"
    assert undeclared[-1].path == "f49"
    assert [f.message for f in capped.findings if f.code == "change.missing"] == [
        "change.missing #0",
        "change.missing #1",
        "change.missing #2",
    ]
    assert capped.status == "fail"


def test_findings_exactly_at_the_cap_are_left_as_they_are() -> None:
    result = _result({"change.undeclared": 50})
    assert cap_findings(result, per_code=50) is result


def test_the_verdict_caps_findings_per_code(repo: GitRepo, tmp_path: Path) -> None:
    session = fixed_session(repo)
    repo.commit({f"extra{n}.txt": "x" for n in range(60)}, "undeclared files")
    report = session.report()
    report["repo"]["head_commit"] = repo.head()
    cfg = config_toml(tmp_path, repo)
    outcome = verify_report(to_bytes(report), Config.load(cfg), store=False)
    undeclared = [
        f for f in outcome.verification.checks["changes"].findings if f.code == "change.undeclared"
    ]
    assert len(undeclared) == 50
    assert undeclared[-1].message.endswith("(and 10 more change.undeclared)")
