"""`verifier.app.gate.decide` and `watch`: the exit code from the sessions' effective statuses."""

from __future__ import annotations

import pytest

from verifier.app.gate import (
    MISSING,
    GateSelection,
    GateSession,
    StandingOverride,
    Verdict,
    decide,
    session_from_api,
    watch,
)
from verifier.errors import ConfigError, SourceUnavailable
from verifier.findings import Finding

SELECTION = GateSelection(commits=("a" * 40,))


def s(session_id: str, status: str, override: str | None = None) -> GateSession:
    return GateSession(
        session_id=session_id,
        computed_status=status,
        override=None
        if override is None
        else StandingOverride(override, "alice", "checked by hand"),
    )


@pytest.mark.parametrize(
    ("statuses", "inconclusive", "code"),
    [
        (["delivered"], "fail", 0),
        (["delivered", "delivered"], "fail", 0),
        (["delivered", "not_delivered"], "fail", 1),
        (["inconclusive"], "fail", 3),
        (["pending"], "fail", 3),
        (["delivered", "pending"], "pass", 0),
        (["inconclusive"], "pass", 0),
        # Not delivered wins over inconclusive, whatever the policy.
        (["inconclusive", "not_delivered"], "fail", 1),
        (["pending", "not_delivered"], "pass", 1),
        ([MISSING], "pass", 1),
        ([MISSING, "delivered"], "fail", 1),
    ],
)
def test_exit_code_follows_the_worst_status(
    statuses: list[str], inconclusive: str, code: int
) -> None:
    sessions = [s(f"s{i}", status) for i, status in enumerate(statuses)]
    decision = decide(sessions, SELECTION, inconclusive=inconclusive)
    assert decision.exit_code == code
    assert decision.outcome == {0: "passed", 1: "blocked", 3: "undecided"}[code]


def test_no_session_selected_blocks_unless_allowed() -> None:
    blocked = decide([], SELECTION)
    assert (blocked.exit_code, blocked.reason) == (1, "no session selected")
    allowed = decide([], SELECTION, allow_empty=True)
    assert (allowed.exit_code, allowed.reason) == (0, "no session selected (--allow-empty)")


def test_a_standing_override_decides_and_the_computed_verdict_stays_beside_it() -> None:
    let_through = decide([s("s1", "not_delivered", override="delivered")], SELECTION)
    assert let_through.exit_code == 0
    [d] = let_through.sessions
    assert (d.status, d.session.computed_status, d.decided_by) == (
        "delivered",
        "not_delivered",
        "override",
    )
    assert let_through.overridden == 1

    held = decide([s("s1", "delivered", override="not_delivered")], SELECTION)
    assert held.exit_code == 1
    assert held.sessions[0].decided_by == "override"
    # An override of a pending session decides too: there is nothing to wait for.
    assert decide([s("s1", "pending", override="delivered")], SELECTION).exit_code == 0


def test_inconclusive_sessions_do_not_block_with_the_pass_policy_but_are_marked() -> None:
    decision = decide([s("a", "inconclusive"), s("b", "delivered")], SELECTION, inconclusive="pass")
    assert decision.exit_code == 0
    assert [(d.verdict, d.blocks) for d in decision.sessions] == [
        (Verdict.UNDECIDED, False),
        (Verdict.PASS, False),
    ]
    assert (
        decision.reason
        == "1 of 2 sessions delivered, 1 inconclusive or pending (--inconclusive=pass)"
    )


def test_an_unknown_policy_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="--inconclusive: got 'maybe', expected fail or pass"):
        decide([], SELECTION, inconclusive="maybe")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_watch_reads_again_while_a_session_is_pending_then_returns_the_last_reading() -> None:
    readings = [
        [s("a", "pending"), s("b", "delivered")],
        [s("a", "pending"), s("b", "delivered")],
        [s("a", "not_delivered"), s("b", "delivered")],
    ]
    clock = Clock()
    lines: list[str] = []
    watched = watch(
        lambda: readings.pop(0), 60, progress=lines.append, clock=clock, sleep=clock.sleep
    )
    assert [x.computed_status for x in watched.sessions] == ["not_delivered", "delivered"]
    assert readings == []
    assert clock.slept == [1.0, 1.0]
    assert lines[0] == "waiting for 1 of 2 sessions still pending (a): 0s of 60s"
    assert watched.waited_s == 2.0


def test_watch_stops_at_the_deadline_with_sessions_still_pending() -> None:
    clock = Clock()
    reads = []

    def read() -> list[GateSession]:
        reads.append(clock.now)
        return [s("a", "pending")]

    watched = watch(read, 2.5, clock=clock, sleep=clock.sleep)
    assert watched.sessions[0].computed_status == "pending"
    assert clock.slept == [1.0, 1.0, 0.5]  # never past the deadline
    assert len(reads) == 4


def test_watch_waits_for_a_named_session_to_be_stored_and_for_a_report_not_posted_yet() -> None:
    clock = Clock()
    readings = [[GateSession.missing("a")], [s("a", "delivered")]]
    assert watch(lambda: readings.pop(0), 10, clock=clock, sleep=clock.sleep).sessions == [
        s("a", "delivered")
    ]
    # Nothing selected yet: the report may not be posted; it is read again until it is.
    posted = [[], [], [s("b", "pending")], [s("b", "delivered")]]
    said: list[str] = []
    watched = watch(lambda: posted.pop(0), 10, clock=clock, sleep=clock.sleep, progress=said.append)
    assert watched.sessions == [s("b", "delivered")] and not posted
    assert said[0].startswith("waiting for a session to be posted")
    # Never posted: the wait ends at its bound with nothing.
    start = clock.now
    never = watch(lambda: [], 10, clock=clock, sleep=clock.sleep)
    assert never.sessions == [] and never.waited_s == 10 and clock.now - start == 10


def test_a_server_that_reports_an_override_lets_it_decide_with_its_author_and_reason() -> None:
    # The shape of GET /v1/sessions/{id} once the API carries overrides (keys beside the
    # pinned ones); a server without them has neither key, and the computed verdict decides.
    body = {
        "session_id": "s1",
        "delivery_status": "not_delivered",
        "override_status": "delivered",
        "effective_status": "delivered",
        "agent_status": "done",
        "done": True,
        "ended_at": "2026-11-29T10:05:00Z",
        "verdict_run_id": 4,
        "repo": {"name": "calc", "head_commit": "ab" * 20, "branch": "agent/fix"},
        "checks": {
            "changes": {
                "status": "fail",
                "findings": [{"code": "change.missing", "message": "gone", "path": "calc.py"}],
            }
        },
        "overrides": [
            {"id": 1, "status": "not_delivered", "author": "cli:bob", "reason": "first"},
            {"id": 2, "status": "delivered", "author": "token:alice", "reason": "moved by hand"},
        ],
    }
    found = session_from_api(body, with_findings=True)
    assert found.override == StandingOverride("delivered", "token:alice", "moved by hand")
    assert found.findings == (Finding("change.missing", "gone", "calc.py"),)
    assert (found.run_id, found.head_commit, found.ended_at is not None) == (4, "ab" * 20, True)
    decision = decide([found], SELECTION)
    assert (decision.exit_code, decision.sessions[0].decided_by) == (0, "override")

    del body["override_status"], body["overrides"]
    assert decide([session_from_api(body, with_findings=False)], SELECTION).exit_code == 1


def test_a_session_not_in_the_apis_shape_is_refused_by_name() -> None:
    with pytest.raises(
        SourceUnavailable, match="not the API's shape \\(KeyError: 'delivery_status'\\)"
    ):
        session_from_api({"session_id": "s1"}, with_findings=False)
