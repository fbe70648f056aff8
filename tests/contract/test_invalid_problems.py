"""An invalid report lists its problems, field and problem each, up to 20 and a count of the
rest: in the error itself, in ``report check`` (text and JSON), in ``verify`` (stderr, and
under ``--format json`` the error object on stdout) and in the API's refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.report_factory import report_dict
from verifier.contract.report import MAX_PROBLEMS_LISTED, parse_report
from verifier.errors import InvalidReport

# Each claimed change a bare number: every one misses its fields and has the wrong type.
MANY = 30


def three_problems() -> dict[str, Any]:
    report = report_dict()
    del report["repo"]["base_commit"]
    report["agent"]["name"] = 7
    report["status"] = None
    return report


def many_problems() -> dict[str, Any]:
    return report_dict(changes=[{"path": n} for n in range(MANY)])


def refused(report: dict[str, Any]) -> InvalidReport:
    with pytest.raises(InvalidReport) as caught:
        parse_report(json.dumps(report).encode())
    return caught.value


def test_every_problem_is_listed_with_its_field() -> None:
    error = refused(three_problems())
    fields = [field for field, _ in error.problems]
    assert sorted(fields) == ["agent.name", "repo.base_commit", "status"]
    assert (error.field, error.problem) == error.problems[0] and error.more == 0
    assert dict(error.problems)["repo.base_commit"] == "required field is missing"
    assert "Input should be a valid string (got 7)" in dict(error.problems)["agent.name"]
    assert error.count == 3
    # The message names each of them, never "and 2 more" alone.
    assert str(error).startswith("invalid report: 3 problems; ")
    for field in fields:
        assert f"{field}: " in str(error)
    assert "more" not in str(error)


def test_past_twenty_problems_the_rest_are_counted() -> None:
    error = refused(many_problems())
    assert len(error.problems) <= MAX_PROBLEMS_LISTED == 20
    assert error.count > MAX_PROBLEMS_LISTED and error.more == error.count - len(error.problems)
    assert all(field.startswith("changes.") and problem for field, problem in error.problems)
    assert str(error).endswith(f"; and {error.more} more not listed")
    assert error.extra()["more_problems"] == error.more
    assert len(error.extra()["problems"]) == len(error.problems)


def test_one_problem_reads_as_before() -> None:
    report = report_dict()
    del report["repo"]["base_commit"]
    error = refused(report)
    assert str(error) == "invalid report: repo.base_commit: required field is missing"
    assert error.problems == (("repo.base_commit", "required field is missing"),)
    assert error.extra() == {} and error.problem_text() == "required field is missing"


def _verifier(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        input=None if stdin is None else stdin.decode(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_report_check_lists_every_problem_in_text_and_json(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(three_problems()), encoding="utf-8")
    done = _verifier("report", "check", str(path))
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    assert lines[0] == "invalid report: the bytes are not a session report v1; 3 problems:"
    assert "  repo.base_commit: required field is missing" in lines
    assert any(line.startswith("  agent.name: Input should be a valid string") for line in lines)
    assert any(line.startswith("  status: ") for line in lines)

    data = json.loads(_verifier("report", "check", str(path), "--format", "json").stdout)
    assert data["valid"] is False and data["exit_code"] == 2
    assert sorted(p["field"] for p in data["problems"]) == [
        "agent.name",
        "repo.base_commit",
        "status",
    ]
    assert data["more_problems"] == 0

    path.write_text(json.dumps(many_problems()), encoding="utf-8")
    text = _verifier("report", "check", str(path)).stdout
    listed = [line for line in text.splitlines() if line.startswith("  changes.")]
    assert len(listed) == MAX_PROBLEMS_LISTED
    assert text.splitlines()[-1].startswith("  … and ") and "more problems not listed" in text


def test_verify_lists_the_problems_and_under_json_prints_the_error_object(
    tmp_path: Path,
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(three_problems()), encoding="utf-8")
    text = _verifier("verify", str(path), "--no-store")
    assert text.returncode == 2 and text.stdout == ""
    assert text.stderr.startswith("verifier: invalid report: not a report v1; 3 problems:\n")
    assert "\n  repo.base_commit: required field is missing\n" in text.stderr

    done = _verifier("verify", str(path), "--no-store", "--format", "json")
    assert done.returncode == 2
    body = json.loads(done.stdout)  # one document on stdout: the error object
    assert set(body) == {"error", "problems", "more_problems"}
    assert body["error"]["code"] == "invalid_report"
    assert body["error"]["field"] == body["problems"][0]["field"]
    assert body["error"]["problem"].endswith("(and 2 more problems: see problems)")
    assert sorted(p["field"] for p in body["problems"]) == [
        "agent.name",
        "repo.base_commit",
        "status",
    ]
    assert "repo.base_commit: required field is missing" in done.stderr


def test_the_api_refusal_lists_the_problems(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from tests.support.api import make_config, make_tokens
    from verifier.service.api import create_app

    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    tokens = make_tokens(url)
    with TestClient(create_app(make_config(url))) as client:
        answer = client.post(
            "/v1/sessions",
            content=json.dumps(three_problems()).encode(),
            headers={
                "Authorization": f"Bearer {tokens['ingest']}",
                "Content-Type": "application/json",
            },
        )
    assert answer.status_code == 400
    body = answer.json()
    assert body["error"]["code"] == "invalid_report"
    assert len(body["problems"]) == 3 and body["more_problems"] == 0
