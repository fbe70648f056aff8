"""`verifier report check`: a report judged offline, with what its author must fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audit.chain import entry_hash, seal
from audit.jcs import canonicalize, jcs_sha256
from tests.support.sessions import calc_repo, fixed_session, to_bytes
from verifier import resources
from verifier.app import reportcheck
from verifier.app.reportcheck import check_file, check_report
from verifier.errors import ConfigError, InvalidReport
from verifier.formats import render

PROFILES = resources.profiles_dir()
SEALED = ("v", "session_id", "seq", "prev", "hash")


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    """A clean session's report: read calc.py, fix subtract(), commit."""
    return fixed_session(calc_repo(tmp_path / "calc")).report()


def resealed(report: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """`report` with `entries` chained anew, as a harness would write them: the chain holds."""
    bodies = [{k: v for k, v in e.items() if k not in SEALED} for e in entries]
    trail = seal(report["session_id"], bodies)
    report["audit"] = {"entries": trail, "count": len(trail), "head": trail[-1]["hash"]}
    return report


def cli(*args: str | Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", "report", "check", *map(str, args)],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
        check=False,
    )


def write(tmp_path: Path, report: dict[str, Any]) -> Path:
    path = tmp_path / "report.json"
    path.write_bytes(to_bytes(report))
    return path


def tool_call_index(report: dict[str, Any], call_id: str) -> int:
    entries = report["audit"]["entries"]
    return next(i for i, e in enumerate(entries) if e.get("call_id") == call_id)


def test_a_clean_report_is_valid_with_no_finding(report: dict[str, Any]) -> None:
    result = check_report(to_bytes(report), PROFILES)
    assert result.exit_code == 0
    assert result.findings == () and result.invalid is None
    assert result.profile == "default" and result.calls == 2
    assert "valid, no finding" in render.report_check_text(result)
    assert json.loads(render.report_check_json(result))["exit_code"] == 0


def test_a_clean_report_exits_0_through_the_cli(report: dict[str, Any], tmp_path: Path) -> None:
    done = cli(write(tmp_path, report))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"report {report['session_id']}: valid, no finding" in done.stdout


def test_a_tampered_entry_is_found_by_hash_with_its_seq(report: dict[str, Any]) -> None:
    i = tool_call_index(report, "c1")
    entry = report["audit"]["entries"][i]
    entry["checkpoint"] = "edited after sealing"
    result = check_report(to_bytes(report), PROFILES)
    assert result.exit_code == 1
    (finding,) = [f for f in result.findings if f.code == "audit.hash_mismatch"]
    assert finding.path == f"audit.entries[{i}].hash"
    assert finding.expected == entry_hash(entry) and finding.found == entry["hash"]
    text = render.report_check_text(result)
    assert f"where:    audit.entries[{i}].hash (entry seq {entry['seq']})" in text
    assert f"expected: {entry_hash(entry)}" in text and f"found:    {entry['hash']}" in text
    assert "--explain" in text  # the hint, since there is a hash to explain
    data = json.loads(render.report_check_json(result))
    assert {"code": "audit.hash_mismatch", "seq": entry["seq"]}.items() <= data["findings"][
        0
    ].items()


def test_explain_prints_the_canonical_bytes_and_both_hashes(
    report: dict[str, Any], tmp_path: Path
) -> None:
    i = tool_call_index(report, "c2")
    entry = report["audit"]["entries"][i]
    entry["ts"] = entry["ts"].replace("Z", "+00:00")  # same instant, other bytes: another hash
    body = {k: v for k, v in entry.items() if k != "hash"}
    path = write(tmp_path, report)

    done = cli(path, "--explain")
    assert done.returncode == 1, done.stdout + done.stderr
    assert canonicalize(body).decode("utf-8") in done.stdout.splitlines()
    assert f"computed: {entry_hash(entry)}" in done.stdout
    assert f"stated:   {entry['hash']}" in done.stdout
    assert '"audit-entry/v1", one NUL byte' in done.stdout

    plain = cli(path)
    assert canonicalize(body).decode("utf-8") not in plain.stdout

    data = json.loads(cli(path, "--explain", "--format", "json").stdout)
    (explained,) = data["explanations"]
    assert explained["canonical"].encode("utf-8") == canonicalize(body)
    assert explained["prefix"] == "audit-entry/v1\x00"
    assert explained["seq"] == entry["seq"] and explained["stated"] == entry["hash"]


def test_explain_gives_the_canonical_arguments_behind_an_arguments_hash(
    report: dict[str, Any],
) -> None:
    entries = report["audit"]["entries"]
    i = tool_call_index(report, "c2")
    entries[i]["args_sha256"] = jcs_sha256({"path": "calc.py"})  # the harness hashed too little
    result = check_report(to_bytes(resealed(report, entries)), PROFILES)
    assert [f.code for f in result.findings] == ["audit.args_mismatch"]
    (explained,) = result.explanations
    args = next(
        p["function_call"]["args"]
        for c in report["trajectory"]["contents"]
        for p in c["parts"]
        if p.get("function_call", {}).get("id") == "c2"
    )
    assert explained.kind == "args" and explained.call_id == "c2"
    assert explained.canonical == canonicalize(args)
    assert explained.computed == jcs_sha256(args) == result.findings[0].expected
    assert canonicalize(args).decode("utf-8") in render.report_check_text(result, explain=True)


def test_a_missing_entry_is_a_call_without_entry(report: dict[str, Any]) -> None:
    entries = report["audit"]["entries"]
    del entries[tool_call_index(report, "c1")]
    result = check_report(to_bytes(resealed(report, entries)), PROFILES)
    assert result.exit_code == 1
    assert [f.code for f in result.findings] == ["audit.call_without_entry"]
    assert "audit.call_without_entry: call c1 (read_file)" in render.report_check_text(result)


def test_an_entry_cut_without_relinking_names_each_break(report: dict[str, Any]) -> None:
    del report["audit"]["entries"][tool_call_index(report, "c1")]
    codes = {f.code for f in check_report(to_bytes(report), PROFILES).findings}
    assert {"audit.seq_gap", "audit.prev_mismatch", "audit.count_mismatch"} <= codes
    assert "audit.call_without_entry" in codes


def test_a_claim_the_trail_does_not_explain_names_the_file_and_claim(
    report: dict[str, Any],
) -> None:
    report["changes"][0]["sha256_after"] = "0" * 64
    result = check_report(to_bytes(report), PROFILES)
    (finding,) = result.findings
    assert finding.code == "audit.effect_mismatch"
    assert "where:    file calc.py (changes[0])" in render.report_check_text(result)


def test_a_claim_outside_the_repository_is_found_without_a_repository(
    report: dict[str, Any],
) -> None:
    report["changes"][0]["path"] = "../calc.py"
    findings = check_report(to_bytes(report), PROFILES).findings
    unsafe = [f for f in findings if f.code == "change.path_unsafe"]
    assert [f.path for f in unsafe] == ["changes[0].path"]


def test_an_invalid_report_exits_2_naming_the_field(report: dict[str, Any], tmp_path: Path) -> None:
    del report["repo"]["base_commit"]
    path = write(tmp_path, report)
    done = cli(path)
    assert done.returncode == 2
    assert "field:   repo.base_commit" in done.stdout
    assert "required field is missing" in done.stdout

    data = json.loads(cli("-", "--format", "json", stdin=path.read_bytes()).stdout)
    assert data == {
        "valid": False,
        "field": "repo.base_commit",
        "problem": "required field is missing",
        "problems": [{"field": "repo.base_commit", "problem": "required field is missing"}],
        "more_problems": 0,
        "findings": [],
        "exit_code": 2,
    }


def test_bytes_that_are_not_json_exit_2() -> None:
    result = check_report(b"{not json", PROFILES)
    assert result.exit_code == 2 and result.invalid is not None
    assert result.invalid.field == "$"


def test_an_unknown_tool_profile_is_a_usage_error_naming_it(
    report: dict[str, Any], tmp_path: Path
) -> None:
    report["agent"]["tool_profile"] = "acme"
    path = write(tmp_path, report)
    done = cli(path)
    assert done.returncode == 2
    assert "'acme'" in done.stderr

    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "acme.toml").write_bytes((PROFILES / "default.toml").read_bytes())
    done = cli(path, "--profile-dir", profiles)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "profile acme" in done.stdout


def test_calls_the_profile_does_not_know_are_noted(report: dict[str, Any], tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "default.toml").write_text("[functions]\n", encoding="utf-8")
    result = check_report(to_bytes(report), profiles)
    assert result.exit_code == 0
    assert result.unknown_calls == ("read_file", "replace_lines")
    assert "does not know" in render.report_check_text(result)


def test_an_unreadable_report_file_exits_2(tmp_path: Path) -> None:
    done = cli(tmp_path / "missing.json")
    assert done.returncode == 2
    assert "cannot read report" in done.stderr


def test_mangled_reports_are_rendered_never_crash(report: dict[str, Any]) -> None:
    import random

    from tests.support.mangle import mutate

    rng = random.Random(5)
    seen = set()
    for _ in range(200):
        result = check_report(json.dumps(mutate(report, rng)).encode(), PROFILES)
        for explain in (False, True):
            render.report_check_text(result, explain=explain)
            data = json.loads(render.report_check_json(result, explain=explain))
            assert data["exit_code"] == result.exit_code
        seen.add(result.exit_code)
    assert {1, 2} <= seen  # both refused and judged reports were rendered


def test_check_file_reads_a_file_with_the_packaged_profiles_by_default(
    report: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(to_bytes(report))
    assert check_file(str(path)) == check_report(to_bytes(report), PROFILES)
    with pytest.raises(ConfigError, match="cannot read report"):
        check_file(str(tmp_path / "absent.json"))


def test_check_file_refuses_a_report_over_the_size_limit_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reportcheck, "DEFAULT_MAX_REPORT_BYTES", 8)
    path = tmp_path / "r.json"
    path.write_bytes(b'{"schema_version": "1"}')
    with pytest.raises(InvalidReport, match="over the limit of 8 bytes"):
        check_file(str(path))
