"""`Store.session_lines` and `Store.findings_of`, the column reads of exports and the merge
gate, agree with what `Store.listed` and `Store.runs` load whole."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.report_factory import finished, make_report_bytes
from verifier.contract.report import parse_report
from verifier.findings import CheckResult, CheckStatus, Finding
from verifier.store import SessionFilter, Store

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)


def findings(prefix: str, n: int) -> tuple[Finding, ...]:
    return tuple(Finding(f"{prefix}.f{i}", f"{prefix} {i}", f"p{i}.py") for i in range(n))


def test_lines_and_findings_agree_with_the_runs_loaded_whole(db_url: str) -> None:
    with Store.open(db_url) as store:
        for n in range(7):
            ended = (T0 + timedelta(minutes=n)).isoformat().replace("+00:00", "Z")
            store.ingest(parse_report(make_report_bytes(f"s{n}", "done", ended_at=ended)))
        # Checks in an order that is not alphabetical, several findings each; a later
        # inconclusive run does not hide the conclusive one; one session never verified.
        checks = {
            "tests": CheckResult("tests", CheckStatus.FAIL, findings("tests", 3)),
            "changes": CheckResult("changes", CheckStatus.FAIL, findings("change", 2)),
            "audit": CheckResult("audit", CheckStatus.PASS, findings("audit", 1)),
        }
        for n in range(6):
            store.record_run(finished(f"s{n}", checks if n % 2 else {"audit": checks["audit"]}, T0))
        store.record_run(
            finished("s1", {"tests": CheckResult.error("tests", "tests.no_command", "none")}, T0)
        )

        lines = list(store.session_lines(page=2))  # pages of two: four reads
        shown = store.findings_of([line.run_id for line in lines if line.run_id is not None])

        assert [line.session.session_id for line in lines] == [f"s{n}" for n in range(6, -1, -1)]
        for line in lines:
            listed = store.listed(line.session.session_id)
            run = listed.verdict_run or listed.latest_run
            assert line.session == listed.session
            assert line.delivery_status == listed.delivery_status
            assert line.verdict_run_id == (listed.verdict_run and listed.verdict_run.id)
            assert line.run_id == (run and run.id)
            assert line.first_finding_code == (run.findings[0].code if run else None)
            assert shown.get(line.run_id or 0, ()) == (run.findings if run else ())
        assert shown[lines[5].run_id or 0][:2] == findings("tests", 2)  # s1: its conclusive run
        only = list(store.session_lines(SessionFilter(session_ids=("s3", "s6"))))
        assert [line.session.session_id for line in only] == ["s6", "s3"]
