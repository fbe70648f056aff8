"""The audit check against a witnessed prefix, without a store: what the pipeline hands in."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.support.report_factory import report_dict
from tests.support.trust import trail
from verifier.checks.audit import trusted
from verifier.checks.base import WitnessedPrefix
from verifier.config import Config
from verifier.contract.report import parse_report
from verifier.findings import CheckResult, CheckStatus

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def report_with(entries: list[dict[str, object]]) -> object:
    audit = {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]}
    return parse_report(json.dumps(report_dict("s-1", audit=audit)).encode())


def prefix(entries: list[dict[str, object]]) -> WitnessedPrefix:
    return WitnessedPrefix(
        tuple(str(e["hash"]) for e in entries),
        tuple(T0 + timedelta(seconds=i) for i in range(len(entries))),
    )


def config(require: bool) -> Config:
    return Config.from_mapping({"agents": {"repo-fixer": {"require_witness": require}}})


PASS = CheckResult("audit", CheckStatus.PASS)


def test_a_trail_that_drops_a_witnessed_entry_fails() -> None:
    entries = trail(n=4)
    shorter = trail(n=3)  # rebuilt without one call: entry 2 is not the witnessed one
    result = trusted(PASS, report_with(shorter), config(False), prefix(entries))  # type: ignore[arg-type]
    assert result.status is CheckStatus.FAIL
    [finding] = result.findings
    assert (finding.code, finding.path) == ("audit.witness_mismatch", "audit.entries[2]")
    assert "received at 2026-11-29T10:00:02Z" in finding.message
    cut = trusted(PASS, report_with(entries[:3]), config(False), prefix(entries))  # type: ignore[arg-type]
    [finding] = cut.findings
    assert (finding.path, finding.found) == ("audit.entries[3]", "missing")
    assert "drops entry 3" in finding.message


def test_a_trail_witnessed_in_part_is_inconclusive_only_under_require_witness() -> None:
    entries = trail(n=4)
    report = report_with(entries)
    seen = prefix(entries[:2])
    lax = trusted(PASS, report, config(False), seen)  # type: ignore[arg-type]
    assert lax.status is CheckStatus.PASS
    assert lax.details["witness"] == {
        "entries": "2 of 4",
        "witnessed": 2,
        "total": 4,
        "first_seen": "2026-11-29T10:00:00Z",
        "last_seen": "2026-11-29T10:00:01Z",
    }
    strict = trusted(PASS, report, config(True), seen)  # type: ignore[arg-type]
    assert strict.status is CheckStatus.ERROR
    assert [f.code for f in strict.findings] == ["audit.unwitnessed"]
    whole = trusted(PASS, report, config(True), prefix(entries))  # type: ignore[arg-type]
    assert whole.status is CheckStatus.PASS and whole.details["witness"]["entries"] == "4 of 4"


def test_without_a_store_the_verdict_says_the_witness_was_not_consulted() -> None:
    result = trusted(PASS, report_with(trail()), config(False), None)  # type: ignore[arg-type]
    assert result.details["witness"] is None
    assert any("witness was not consulted" in n for n in result.notes)


def test_require_witness_without_a_store_to_ask_is_inconclusive() -> None:
    result = trusted(PASS, report_with(trail()), config(True), None)  # type: ignore[arg-type]
    assert result.status is CheckStatus.ERROR
    assert [f.code for f in result.findings] == ["audit.unwitnessed"]
