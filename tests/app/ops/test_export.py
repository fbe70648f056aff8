"""`verifier export sessions` and GET /v1/export/sessions: every matching row, both
verdicts, CSV safe from formula injection, produced a page at a time."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.api import bearer, make_config, verification
from tests.support.report_factory import make_report_bytes
from verifier import cli
from verifier.app import export
from verifier.contract.report import parse_report
from verifier.store import Listed, SessionFilter, Store
from verifier.store.overrides import record_override
from verifier.store.rows import MAX_PAGE

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
AGENTS = ("fixer", "writer", '=HYPERLINK("http://evil")')


def seed(store: Store, count: int) -> None:
    """`count` sessions: three agents, two repos, done or not, every verdict."""
    for n in range(count):
        ended = T0 + timedelta(minutes=n)
        agent = {"name": AGENTS[n % 3], "version": "1", "tool_profile": "default"}
        if n % 2:
            agent["model"] = "@SUM(1)" if n % 7 == 1 else "gemini-3.5-flash"
        raw = make_report_bytes(
            f"s{n:05d}",
            "done" if n % 4 else "error",
            agent=agent,
            repo={
                "name": "calc" if n % 5 else "shop",
                "base_commit": "6f1c" * 10,
                "head_commit": f"{n % 3:040x}",
                "branch": "-x" if n % 11 == 0 else "main",
            },
            started_at=(ended - timedelta(minutes=1)).isoformat().replace("+00:00", "Z"),
            ended_at=ended.isoformat().replace("+00:00", "Z"),
        )
        store.ingest(parse_report(raw))
        if n % 3 == 1:
            store.record_run(verification(f"s{n:05d}", failed=n % 2 == 1))
        elif n % 3 == 2 and n % 6 == 2:
            store.record_run(verification(f"s{n:05d}", error=True))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as opened:
        seed(opened, 60)
        yield opened


def listed_row(listed: Listed) -> dict[str, Any]:
    """The row of a session as `Store.listed` sees it, with its runs loaded whole: the
    oracle `Store.session_lines` (which reads only a few columns) must agree with."""
    s = listed.session
    shown = listed.verdict_run or listed.latest_run
    verdict = listed.verdict_run
    return {
        "session_id": s.session_id,
        "agent": s.agent_name,
        "agent_version": s.agent_version,
        "model": s.agent_model,
        "repo": s.repo_name,
        "base_commit": s.base_commit,
        "head_commit": s.head_commit,
        "branch": s.branch,
        "agent_status": s.status,
        "done": s.done,
        "started_at": s.started_at.isoformat().replace("+00:00", "Z"),
        "ended_at": s.ended_at.isoformat().replace("+00:00", "Z"),
        "delivery_status": listed.delivery_status,
        "override_status": s.override_status,
        "effective_status": listed.effective_status,
        "verdict_run_id": None if verdict is None else verdict.id,
        "verified_at": None
        if verdict is None
        else verdict.finished_at.isoformat().replace("+00:00", "Z"),
        "first_finding_code": shown.findings[0].code if shown and shown.findings else None,
        "report_sha256": s.report_sha256,
    }


def expected_rows(store: Store, filters: SessionFilter) -> list[dict[str, Any]]:
    """The rows counted from `store.sessions()` by hand, newest ended first."""
    rows = []
    for listed in store.sessions():
        s = listed.session
        keep = (
            (filters.agent is None or s.agent_name == filters.agent)
            and (filters.repo is None or s.repo_name == filters.repo)
            and (filters.done is None or s.done == filters.done)
            and (
                filters.delivery_status is None or listed.delivery_status == filters.delivery_status
            )
            and (filters.head_commits is None or s.head_commit in filters.head_commits)
            and (filters.branch is None or s.branch == filters.branch)
            and (filters.ended_from is None or s.ended_at >= filters.ended_from)
            and (filters.ended_to is None or s.ended_at < filters.ended_to)
        )
        if keep:
            rows.append(listed_row(listed))
    return sorted(rows, key=lambda r: (r["ended_at"], r["session_id"]), reverse=True)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert cli.run(args) == 0
    return capsys.readouterr().out


def test_the_row_has_every_column_and_both_verdicts(store: Store) -> None:
    record_override(store, "s00001", status="delivered", reason="moved", author="cli:ana")
    (line,) = export.lines(store, SessionFilter(session_ids=("s00001",)), "jsonl")
    row = json.loads(line)
    assert row == listed_row(store.listed("s00001"))
    assert tuple(row) == export.COLUMNS
    assert row["delivery_status"] == "not_delivered"
    assert (row["override_status"], row["effective_status"]) == ("delivered", "delivered")
    run = store.runs("s00001")[0]
    assert (row["verdict_run_id"], row["first_finding_code"]) == (run.id, "change.missing")
    assert row["verified_at"] == run.finished_at.isoformat().replace("+00:00", "Z")
    assert row["head_commit"] == f"{1:040x}" and row["done"] is True


@pytest.mark.parametrize(
    ("args", "filters"),
    [
        ([], SessionFilter()),
        (["--agent", "writer", "--done"], SessionFilter(agent="writer", done=True)),
        (["--not-done", "--repo", "shop"], SessionFilter(done=False, repo="shop")),
        (["--delivery-status", "not_delivered"], SessionFilter(delivery_status="not_delivered")),
        (
            ["--head-commit", f"{1:040x}", "--head-commit", f"{2:040x}", "--branch", "main"],
            SessionFilter(head_commits=(f"{1:040x}", f"{2:040x}"), branch="main"),
        ),
        (
            ["--from", "2026-11-01T08:10:00Z", "--to", "2026-11-01T08:30:00+00:00"],
            SessionFilter(
                ended_from=T0 + timedelta(minutes=10), ended_to=T0 + timedelta(minutes=30)
            ),
        ),
    ],
)
def test_jsonl_export_equals_the_rows_of_the_matching_sessions(
    store: Store,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    filters: SessionFilter,
) -> None:
    monkeypatch.setenv("VERIFIER_DATABASE_URL", db_url)
    out = run_cli(["export", "sessions", "--format", "jsonl", *args], capsys)
    got = [json.loads(line) for line in out.splitlines()]
    want = expected_rows(store, filters)
    assert got == want
    assert want, "a filter that keeps nothing proves nothing"


def test_csv_cells_that_would_run_as_formulas_are_quoted(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VERIFIER_DATABASE_URL", db_url)
    out = tmp_path / "sessions.csv"
    assert cli.run(["export", "sessions", "--out", str(out)]) == 0

    with out.open(newline="", encoding="utf-8") as stream:
        header, *rows = list(csv.reader(stream))
    assert tuple(header) == export.COLUMNS
    assert len(rows) == 60
    cells = {cell for row in rows for cell in row}
    assert '\'=HYPERLINK("http://evil")' in cells and "'@SUM(1)" in cells and "'-x" in cells
    assert not any(c.startswith(("=", "+", "-", "@")) for c in cells)
    assert not (tmp_path / "sessions.csv.partial").exists()
    jsonl = expected_rows(store, SessionFilter())
    assert [r[0] for r in rows] == [r["session_id"] for r in jsonl]
    assert {r["agent"] for r in jsonl} >= {'=HYPERLINK("http://evil")'}  # JSON keeps the text


def test_export_reads_every_page_and_one_page_at_a_time(db_url: str) -> None:
    count = 2 * MAX_PAGE + 3

    class CountingStore(Store):
        pages = 0

        def transaction(self, *, write: bool = False) -> Any:
            CountingStore.pages += 1  # session_lines reads each page in a transaction of its own
            return super().transaction(write=write)

    with Store.open(db_url) as plain:
        seed(plain, count)
    with CountingStore.open(db_url) as store:
        lines = export.lines(store, SessionFilter(), "csv")
        next(lines), next(lines)
        assert CountingStore.pages == 1  # the first rows are out before the rest is read
        rest = list(lines)
    assert CountingStore.pages == 3
    ids = [line.split(",", 1)[0] for line in rest]
    assert len(ids) == count - 1 and len(set(ids)) == count - 1
    assert ids[-1] == "s00000"


def test_no_store_yet_is_an_empty_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VERIFIER_DATABASE_URL", f"sqlite:///{tmp_path / 'none.sqlite3'}")
    assert run_cli(["export", "sessions"], capsys).splitlines() == [",".join(export.COLUMNS)]


def test_exported_reads_the_configured_store_and_without_one_says_why(
    db_url: str, tmp_path: Path
) -> None:
    with Store.open(db_url) as store:
        seed(store, 3)
    with export.exported(make_config(db_url), SessionFilter(), "jsonl") as lines:
        rows = [json.loads(line) for line in lines]
    assert len(rows) == 3 and list(rows[0]) == list(export.COLUMNS)
    said: list[str] = []
    none = make_config(f"sqlite:///{tmp_path / 'none.sqlite3'}")
    with export.exported(none, SessionFilter(), "jsonl", notice=said.append) as lines:
        assert list(lines) == []
    with export.exported(none, SessionFilter(), "csv", notice=said.append) as lines:
        assert list(lines) == [",".join(export.COLUMNS) + "\r\n"]
    assert len(said) == 2 and "no store at" in said[0]


def test_a_time_without_offset_is_a_usage_error_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.run(["export", "sessions", "--from", "2026-11-01T08:00:00"]) == 2
    err = capsys.readouterr().err
    assert "--from" in err and "no UTC offset" in err


# -- the API ---------------------------------------------------------------------------


@pytest.fixture
def seeded(client: TestClient, db_url: str) -> TestClient:
    with Store.open(db_url) as store:
        seed(store, 60)
    return client


@pytest.mark.parametrize("scope", ["export", "admin"])
def test_the_api_streams_the_same_rows_under_the_export_scope(
    seeded: TestClient, tokens: dict[str, str], db_url: str, scope: str
) -> None:
    query = {"format": "jsonl", "agent": "writer", "head_commit": [f"{1:040x}", f"{2:040x}"]}
    response = seeded.get("/v1/export/sessions", params=query, headers=bearer(tokens[scope]))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    with Store.open(db_url) as store:
        want = expected_rows(
            store, SessionFilter(agent="writer", head_commits=(f"{1:040x}", f"{2:040x}"))
        )
    assert [json.loads(line) for line in response.text.splitlines()] == want
    assert want

    as_csv = seeded.get("/v1/export/sessions", headers=bearer(tokens[scope]))
    assert as_csv.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(as_csv.text)))
    assert tuple(rows[0]) == export.COLUMNS and len(rows) == 61
    assert all(not c.startswith(("=", "+", "-", "@")) for row in rows for c in row)


@pytest.mark.parametrize(("scope", "status"), [("read", 403), ("ingest", 403)])
def test_the_export_needs_the_export_scope(
    seeded: TestClient, tokens: dict[str, str], scope: str, status: int
) -> None:
    response = seeded.get("/v1/export/sessions", headers=bearer(tokens[scope]))
    assert response.status_code == status
    assert response.json()["error"]["code"] == "forbidden"
    assert seeded.get("/v1/export/sessions").status_code == 401


def test_a_bad_format_is_a_bad_request_naming_it(
    seeded: TestClient, tokens: dict[str, str]
) -> None:
    response = seeded.get(
        "/v1/export/sessions", params={"format": "xlsx"}, headers=bearer(tokens["export"])
    )
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "format"


def test_times_with_a_fraction_of_a_second_are_exported_as_utc_text_writes_them(
    db_url: str,
) -> None:
    """The export writes the stored times itself (SQLite's text cut, PostgreSQL's datetime
    formatted), not through typed rows: whole seconds and fractions both as `utc_text`."""
    ended = T0 + timedelta(seconds=5, microseconds=120)
    raw = make_report_bytes(
        "s-frac",
        started_at="2026-11-01T07:59:00Z",
        ended_at=ended.isoformat().replace("+00:00", "Z"),
    )
    with Store.open(db_url) as store:
        store.ingest(parse_report(raw))
        run = verification("s-frac", failed=True)
        store.record_run(run)
        (got,) = (json.loads(x) for x in export.lines(store, SessionFilter(), "jsonl"))
        assert got == listed_row(store.listed("s-frac"))
    assert (got["started_at"], got["ended_at"]) == (
        "2026-11-01T07:59:00Z",
        "2026-11-01T08:00:05.000120Z",
    )
    assert got["verified_at"] == run.finished_at.isoformat().replace("+00:00", "Z")
