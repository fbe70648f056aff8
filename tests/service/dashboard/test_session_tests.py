"""The session page's test run: the classification of a differential run (what the change
did to each test against the base) and the tests run again, as the tests check records
them in its details, through FastAPI's TestClient on a real SQLite store."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from tests.support.api import verification
from tests.support.dashboard_seed import XSS, ingest_at
from tests.support.pages import login, table
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding
from verifier.store import Store

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
ENDED = datetime(2026, 11, 25, 12, tzinfo=UTC)


def _record(db_url: str, session_id: str, details: dict[str, object]) -> None:
    tests = CheckResult(
        "tests",
        CheckStatus.FAIL,
        (Finding("tests.broken", "tests/test_b.py::test_x passed at the base, fails now"),),
        details=details,
    )
    with Store.open(db_url) as store:
        ingest_at(store, session_id, ENDED, agent="diff")
        run = verification(session_id, started_at=ENDED)
        run = replace(
            run,
            checks={**run.checks, "tests": tests},
            delivery_status=DeliveryStatus.NOT_DELIVERED,
        )
        store.record_run(run)


def _rows(page: str, table_id: str, key: str) -> dict[str, dict[str, str]]:
    rows = {}
    for name, body in re.findall(
        rf'<tr {key}="([^"]*)"[^>]*>(.*?)</tr>', table(page, table_id), re.S
    ):
        cells = re.findall(r'data-label="([^"]+)"[^>]*>(.*?)</t[dh]>', body, re.S)
        rows[html.unescape(name)] = {
            label: html.unescape(re.sub(r"<[^>]+>", "", text)) for label, text in cells
        }
    return rows


@SQLITE_ONLY
def test_the_classification_shows_each_class_its_count_and_its_tests(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    many = [f"tests/test_new.py::test_{n}" for n in range(25)]
    details = {
        "exit_code": 1,
        "classification": {
            "counts": {
                "fixed": 1,
                "broken": 1,
                "still_failing": 0,
                "still_passing": 40,
                "new": 25,
                "removed": 0,
            },
            "tests": {
                "fixed": ["tests/test_a.py::test_add"],
                "broken": [XSS],
                "still_failing": [],
                "new": many,
                "removed": [],
            },
            "base": {"status": "fail", "cached_from": None, "duration_s": 1.2},
        },
    }
    _record(db_url, "diff-1", details)
    login(client, tokens["read"])
    page = client.get("/sessions/diff-1").text
    rows = _rows(page, "test-classification", "data-class")
    assert list(rows) == ["fixed", "broken", "still_failing", "still_passing", "new", "removed"]
    assert {k: r["Tests"] for k, r in rows.items()} == {
        "fixed": "1",
        "broken": "1",
        "still_failing": "0",
        "still_passing": "40",
        "new": "25",
        "removed": "0",
    }
    assert rows["fixed"]["Which"] == "tests/test_a.py::test_add"
    assert rows["broken"]["Which"] == XSS and XSS not in page  # a test id is text
    # Twenty named, the rest counted.
    assert rows["new"]["Which"].endswith(", and 5 more") and "test_19" in rows["new"]["Which"]
    assert "test_20" not in rows["new"]["Which"]
    assert "(base run: fail)" in page


@SQLITE_ONLY
def test_tests_run_again_say_which_were_flaky(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    details = {
        "exit_code": 1,
        "attempts": {
            "tests/test_a.py::test_sometimes": ["failed", "passed"],
            "tests/test_a.py::test_never": ["failed", "failed", "failed"],
        },
    }
    _record(db_url, "flaky-1", details)
    login(client, tokens["read"])
    page = client.get("/sessions/flaky-1").text
    rows = _rows(page, "flaky-tests", "data-test")
    assert rows == {
        "tests/test_a.py::test_sometimes": {
            "Test": "tests/test_a.py::test_sometimes",
            "Attempts": "failed, passed",
            "Judged": "flaky",
        },
        "tests/test_a.py::test_never": {
            "Test": "tests/test_a.py::test_never",
            "Attempts": "failed, failed, failed",
            "Judged": "failed at every attempt",
        },
    }
    assert 'id="test-classification"' not in page  # no differential run, no classification


@SQLITE_ONLY
def test_a_run_without_classification_or_attempts_shows_neither(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    _record(db_url, "plain-1", {"exit_code": 1, "classification": "not a mapping"})
    login(client, tokens["read"])
    page = client.get("/sessions/plain-1").text
    assert '<strong class="check-fail">fail</strong>' in page  # the run itself still shows
    assert 'id="test-classification"' not in page and 'id="flaky-tests"' not in page
