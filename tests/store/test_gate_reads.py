"""`verifier.store.gate_reads`, the merge gate's text SQL, gives what the `Store` loads whole
(`Store.listed`, `Store.runs`, `overrides.overrides`), on SQLite and PostgreSQL alike."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.report_factory import BASE_COMMIT, finished, make_report_bytes
from verifier.app.gate import GateSession
from verifier.contract.report import parse_report
from verifier.errors import ConfigError, InfrastructureError
from verifier.findings import CheckResult, CheckStatus, Finding, deciding_order
from verifier.store import NoStore, Store
from verifier.store.gate_reads import GATE_LINE, GateReads
from verifier.store.overrides import overrides, record_override

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
HEAD = "c" * 40
CLASSIFICATION = ("checks", "tests", "details", "classification")
CLASSIFIED = {"counts": {"fixed": 1, "broken": 0}, "tests": [{"id": "t::é", "was": "fail"}]}


def findings(prefix: str, n: int) -> tuple[Finding, ...]:
    return tuple(
        Finding(f"{prefix}.f{i}", f"{prefix} {i}", f"p{i}.py", "e" if i else None, "ü")
        for i in range(n)
    )


def _fill(store: Store) -> None:
    for n in range(7):
        ended = (T0 + timedelta(minutes=n, microseconds=n)).isoformat().replace("+00:00", "Z")
        repo = {
            "name": "calc",
            "base_commit": BASE_COMMIT,
            "head_commit": HEAD if n < 5 else None,
            "branch": "feature/x" if n in (2, 6) else None,
        }
        status = "done" if n % 3 else "error"
        store.ingest(parse_report(make_report_bytes(f"s{n}", status, ended_at=ended, repo=repo)))
    # Checks not in alphabetical order, a failure after an error (the failure decides);
    # a run without a trail (the audit's note); a classification; a later inconclusive run
    # that does not hide the conclusive one; s4 and s6 never verified.
    checks = {
        "tests": CheckResult("tests", CheckStatus.ERROR, findings("tests", 2),
                             details={"classification": CLASSIFIED}),
        "changes": CheckResult("changes", CheckStatus.FAIL, findings("change", 3)),
        "audit": CheckResult("audit", CheckStatus.PASS, (), details={"trail": "none"},
                             notes=("no trail: the report's word", "second note")),
    }  # fmt: skip
    store.record_run(finished("s0", checks, T0))
    recorded = CheckResult("audit", CheckStatus.PASS, (), details={"trail": "recorded"})
    store.record_run(finished("s1", {"audit": recorded, "tests": checks["tests"]}, T0))
    store.record_run(finished("s2", {"changes": checks["changes"]}, T0))
    store.record_run(
        finished("s2", {"tests": CheckResult.error("tests", "tests.no_command", "none")}, T0)
    )
    store.record_run(finished("s3", {"tests": CheckResult("tests", CheckStatus.PASS)}, T0))
    store.record_run(finished("s5", {"tests": CheckResult("tests", CheckStatus.PASS)}, T0))
    record_override(store, "s0", status="delivered", reason="known flaky", author="cli:ana")
    record_override(store, "s3", status="not_delivered", reason="first", author="cli:bo")
    record_override(store, "s3", status="cleared", reason="withdrawn", author="cli:cy")
    record_override(store, "s3", status="not_delivered", reason="after all", author="token:dee")


def test_the_gate_reads_agree_with_what_the_store_loads_whole(db_url: str) -> None:
    with Store.open(db_url) as store:
        _fill(store)
        with GateReads.open(db_url) as reads:
            lines = reads.gate_lines(
                session_ids=("s6", "s0", "ghost"),
                head_commits=(HEAD, "d" * 40),
                branches=("feature/x",),
            )
            assert sorted(lines) == ["s0", "s1", "s2", "s3", "s4", "s6"]  # s5: none of them
            paged = reads.gate_lines(head_commits=(HEAD, "d" * 40), per_query=1)
            assert paged == {sid: line for sid, line in lines.items() if sid != "s6"}
            run_ids = [line[9] for line in lines.values() if line[9] is not None]
            classified = reads.result_values(run_ids, CLASSIFICATION)
            last = reads.last_overrides(["s0", "s3", "s1"])
            assert reads.holds_any(["d" * 40, HEAD], per_query=1)
            assert not reads.holds_any(["d" * 40, "e" * 40])

        for session_id, line in lines.items():
            values = dict(zip(GATE_LINE, line, strict=True))
            listed = store.listed(session_id)
            row = listed.session
            run = listed.verdict_run or listed.latest_run
            assert values["session_id"] == row.session_id
            assert values["delivery_status"] == listed.delivery_status
            assert values["override_status"] == row.override_status
            assert values["repo_name"] == row.repo_name
            assert values["head_commit"] == row.head_commit
            assert values["branch"] == row.branch
            assert values["status"] == row.status
            assert values["done"] is row.done
            assert values["ended_at"] == row.ended_at
            assert values["ended_at"].utcoffset() == timedelta(0)
            assert values["ended_at"].isoformat() == row.ended_at.isoformat()
            assert values["run_id"] == (run and run.id)
            audit = run.result["checks"].get("audit") if run else None
            trail = (audit or {}).get("details", {}).get("trail")
            assert values["audit"] == (audit if trail == "none" else None)
            if run is not None:
                # the deciding order, from the run's document: the failed check's first
                assert values["findings"] == tuple(
                    deciding_order(
                        (check["status"], [Finding(**f) for f in check["findings"]])
                        for check in run.result["checks"].values()
                    )
                )
                tests = run.result["checks"].get("tests", {}).get("details", {})
                assert classified.get(run.id) == tests.get("classification")
            else:
                assert values["findings"] == ()
            standing = overrides(store, session_id)
            assert last.get(session_id) == (
                (standing[-1].author, standing[-1].reason) if standing else None
            )
        assert lines["s0"][11]["notes"] == ["no trail: the report's word", "second note"]
        assert len(lines["s0"][10]) == 5 and lines["s1"][11] is None  # read once; a trail
        # The gate makes its sessions of the lines as they are: its fields, in its order.
        as_named = {"delivery_status": "computed_status", "status": "agent_status"}
        as_named["override_status"] = "override"  # its status; the gate adds who and why
        assert tuple(as_named.get(n, n) for n in GATE_LINE[:11]) == GateSession._fields[:11]
        assert classified[lines["s0"][9]] == CLASSIFIED
        assert last["s3"] == ("token:dee", "after all")
        assert lines["s2"][9] != store.listed("s2").latest_run.id  # the conclusive run


def test_a_store_that_cannot_be_read_is_said_as_the_store_says_it(tmp_path: Path) -> None:
    with pytest.raises(NoStore):
        GateReads.open(f"sqlite:///{tmp_path / 'none.sqlite3'}")
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database, not at all" * 100)
    with pytest.raises(InfrastructureError) as opened:
        GateReads.open(f"sqlite:///{junk}")
    with pytest.raises(InfrastructureError) as by_store:
        Store.open(f"sqlite:///{junk}", read_only=True)
    assert str(opened.value) == str(by_store.value)
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ConfigError) as behind:
        GateReads.open(f"sqlite:///{empty}")
    with pytest.raises(ConfigError) as by_store_behind:
        Store.open(f"sqlite:///{empty}", read_only=True)
    assert str(behind.value) == str(by_store_behind.value)
    assert "run `verifier db upgrade`" in str(behind.value)
