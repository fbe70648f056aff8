"""A blocked gate says what the change did to the tests (the differential run's
classification), read from the local store and from a real server alike."""

from __future__ import annotations

import pytest

from tests.support.api import T0
from tests.support.gate import Project, gate
from tests.support.report_factory import finished
from verifier.findings import CheckResult, CheckStatus, Finding

BROKEN = "tests/test_calc.py::test_add"
CLASSIFICATION = {
    "counts": {"fixed": 1, "broken": 1, "still_failing": 0, "still_passing": 3},
    "tests": {BROKEN: "broken", "tests/test_calc.py::test_sub": "fixed"},
}


def _record_a_regression(project: Project) -> None:
    project.ingest("s-1")
    checks = {
        "changes": CheckResult("changes", CheckStatus.PASS),
        "tests": CheckResult(
            "tests",
            CheckStatus.FAIL,
            (Finding("tests.broken", "passed at the base, fails at the head", BROKEN),),
            details={"classification": CLASSIFICATION},
        ),
    }
    with project.store() as store:
        store.record_run(finished("s-1", checks, T0, seconds=2))


@pytest.mark.parametrize("source", ["store", "server"])
def test_a_blocked_gate_shows_the_tests_classification(
    source: str,
    project: Project,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _record_a_regression(project)
    args = ["--commit", project.head, "--repo", str(project.repo.path)]
    if source == "server":
        live = request.getfixturevalue("live")
        monkeypatch.setenv("VERIFIER_TOKEN", live.tokens["read"])
        args += ["--server", live.url]

    text = gate(capsys, *args)
    assert text.code == 1, text.err
    assert "  tests classified: fixed 1, broken 1, still failing 0, still passing 3" in text.out
    data = gate(capsys, *args, "--format", "json").json()
    (session,) = data["sessions"]
    assert session["classification"]["tests"][BROKEN] == "broken"


def test_a_delivered_session_has_no_classification_in_the_answer(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.ingest("s-1")
    project.record("s-1", "delivered")
    ran = gate(capsys, "--commit", project.head, "--repo", str(project.repo.path), "--format",
               "json")  # fmt: skip
    assert ran.code == 0
    assert ran.json()["sessions"][0]["classification"] is None
