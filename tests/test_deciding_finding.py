"""The "first finding" is the finding that decided the verdict: a failed check's before an
erring one's, computed in `verifier.findings` and, where lists are queried, in SQL; every
face (``list``, ``show``, the dashboard, the gate) shows the same one.

The case the issue found: the changes check could not reach the repository
(``change.repo_unavailable``, an error) while the audit check failed
(``audit.empty_trail``): the session is not delivered because of the audit, and the
listing said ``change.repo_unavailable``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tests.support.api import make_config
from tests.support.report_factory import finished, make_report_bytes
from verifier.app import gate, pipeline, sessions
from verifier.findings import (
    CheckResult,
    CheckStatus,
    DeliveryStatus,
    Finding,
    deciding_finding,
    deciding_order,
)
from verifier.formats import gate as gate_formats
from verifier.formats import render
from verifier.service.dashboard import views
from verifier.store import SessionFilter, Store

T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
UNAVAILABLE = Finding("change.repo_unavailable", "the repository cannot be read")
EMPTY_TRAIL = Finding("audit.empty_trail", "the trail has no entry for 3 tool calls")


def checks() -> dict[str, CheckResult]:
    """The changes check in error first, the audit check failed after it (registry order)."""
    return {
        "changes": CheckResult("changes", CheckStatus.ERROR, (UNAVAILABLE,)),
        "tests": CheckResult("tests", CheckStatus.SKIPPED),
        "audit": CheckResult("audit", CheckStatus.FAIL, (EMPTY_TRAIL,)),
    }


def test_a_failure_decides_before_an_error_and_an_error_before_the_rest() -> None:
    ran = checks()
    pairs = [(r.status.value, r.findings) for r in ran.values()]
    assert deciding_finding(pairs) == EMPTY_TRAIL
    assert deciding_order(pairs) == [EMPTY_TRAIL, UNAVAILABLE]
    only_errors = [("pass", (Finding("tests.note", "n"),)), ("error", (UNAVAILABLE,))]
    assert deciding_finding(only_errors) == UNAVAILABLE
    # Two failed checks: the first in check order; no finding at all: none.
    first, second = Finding("change.missing", "a"), Finding("audit.seq_gap", "b")
    assert deciding_finding([("fail", (first,)), ("fail", (second,))]) == first
    assert deciding_finding([("fail", ()), ("pass", ())]) is None
    verification = finished("s1", ran, T0)
    assert verification.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert verification.first_finding == EMPTY_TRAIL


def test_every_face_shows_the_deciding_finding(db_url: str) -> None:
    with Store.open(db_url) as store:
        pipeline.submit(store, make_report_bytes("s1"), "test:s1")
        store.record_run(finished("s1", checks(), T0))
        # SQL: the listing's first finding, and the findings the gate reads.
        [line] = list(store.session_lines(SessionFilter(session_ids=("s1",))))
        assert line.first_finding_code == "audit.empty_trail"
        assert line.run_id is not None
        assert store.findings_of([line.run_id])[line.run_id] == (EMPTY_TRAIL, UNAVAILABLE)
        listed = store.listed("s1")
    assert listed is not None and listed.verdict_run is not None
    assert listed.verdict_run.deciding_finding == EMPTY_TRAIL
    # The dashboard's silent-failure rows, with the check that found it.
    shown = views.first_finding(listed.verdict_run)
    assert shown is not None and (shown["check"], shown["code"]) == ("audit", "audit.empty_trail")
    config = make_config(db_url)
    # `list` and `show`.
    listing = sessions.listing(config)
    [row] = listing.sessions
    assert row.first_finding == EMPTY_TRAIL
    assert row.summary_dict()["first_finding"]["code"] == "audit.empty_trail"
    text = render.listing_text(listing)
    assert "audit.empty_trail" in text and "change.repo_unavailable" not in text
    assert sessions.show(config, "s1").first_finding == EMPTY_TRAIL
    # The gate's table.
    decision = gate.judge(lambda: config, session_ids=("s1",))
    [judged] = decision.sessions
    assert judged.session.findings[0] == EMPTY_TRAIL
    table = gate_formats.render_text(decision, width=200)
    [row_line] = [line for line in table.splitlines() if line.startswith("│ s1")]
    assert "audit.empty_trail" in row_line and "change.repo_unavailable" not in row_line
