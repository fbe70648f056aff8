"""A report without an audit trail (`audit.trail = "none"`): inconclusive unless the repository
accepts it; never accepted for an agent that requires a witnessed trail; never with entries."""

from __future__ import annotations

import json

import pytest

from tests.support.report_factory import make_report_bytes, report_dict
from verifier.app import reportcheck
from verifier.checks.audit import check, no_trail
from verifier.config import AgentConfig, Config, RepositoryConfig
from verifier.contract.profiles import load_profile
from verifier.contract.report import parse_report
from verifier.errors import InvalidReport
from verifier.findings import CheckStatus

NONE = {"trail": "none", "entries": [], "count": 0, "head": None}
CALL = {
    "role": "model",
    "parts": [{"functionCall": {"id": "c1", "name": "write_todos", "args": {"todos": []}}}],
}


def _report(**overrides: object):  # type: ignore[no-untyped-def]
    trajectory = {"format": "gemini-contents", "contents": [CALL]}
    return parse_report(make_report_bytes(audit=NONE, trajectory=trajectory, **overrides))


def test_without_a_trail_the_check_is_inconclusive_by_default_and_offline() -> None:
    report = _report()
    profile = load_profile(Config().profiles_dir, "gemini-cli-0.61-legacy")
    for result in (
        check(report, profile),
        no_trail(report, profile, RepositoryConfig(name="calc"), Config()),
    ):
        assert result.status is CheckStatus.ERROR
        [finding] = result.findings
        assert (finding.code, finding.path, finding.expected, finding.found) == (
            "audit.no_trail",
            "audit.trail",
            "recorded",
            "none",
        )
        assert result.details["calls"] == 1 and result.details["actions"] == {"session": 1}


def test_a_repository_that_accepts_no_trail_passes_with_a_note() -> None:
    report = _report()
    profile = load_profile(Config().profiles_dir, "gemini-cli-0.61-legacy")
    result = no_trail(report, profile, RepositoryConfig(name="calc", trail="optional"), Config())
    assert result.status is CheckStatus.PASS and not result.findings
    assert "no audit trail" in result.notes[0]


def test_an_agent_that_requires_a_witness_is_never_accepted_without_a_trail() -> None:
    config = Config(agents={"repo-fixer": AgentConfig("repo-fixer", require_witness=True)})
    profile = load_profile(config.profiles_dir, "default")
    result = no_trail(_report(), profile, RepositoryConfig(name="calc", trail="optional"), config)
    assert result.status is CheckStatus.ERROR
    assert "requires a witnessed trail" in result.findings[0].message


@pytest.mark.parametrize(
    "audit",
    [
        {**NONE, "count": 1},
        {**NONE, "head": "ab" * 32},
        {**NONE, "entries": [{"seq": 0}]},
        {**NONE, "trail": "maybe"},
    ],
)
def test_a_report_without_a_trail_holds_no_entries(audit: dict[str, object]) -> None:
    with pytest.raises(InvalidReport) as caught:
        parse_report(json.dumps(report_dict(audit=audit)).encode())
    assert caught.value.field.startswith("audit")


def test_a_recorded_trail_is_the_default() -> None:
    assert parse_report(make_report_bytes()).doc.audit.trail == "recorded"


def test_report_check_offline_says_a_report_without_a_trail_cannot_be_judged_by_it() -> None:
    raw = make_report_bytes(
        audit=NONE, trajectory={"format": "gemini-contents", "contents": [CALL]}
    )
    checked = reportcheck.check_report(raw, Config().profiles_dir)
    assert [f.code for f in checked.findings] == ["audit.no_trail"]
    assert checked.exit_code == 1
