"""verify() end to end: sessions built by the reference harness on real repositories."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.gitrepo import GitRepo, sha256
from tests.support.sessions import CALC, PYTEST, fix_turns, fixed_session, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.checks import registered
from verifier.checks.base import Context
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Verification
from verifier.tasks import Task
from verifier.verify import Options, verify


def config_for(repo: GitRepo, **kw: Any) -> Config:
    repo_cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60, **kw
    )
    return Config(repositories={"calc": repo_cfg})


def check(repo: GitRepo, report: dict[str, Any], **kw: Any) -> Verification:
    options = kw.pop("options", Options())
    before = repo.snapshot()
    result = verify(parse_report(to_bytes(report)), config_for(repo, **kw), options)
    assert repo.snapshot() == before, "verify modified the repository"
    return result


def all_codes(v: Verification) -> set[str]:
    return {f.code for r in v.checks.values() for f in r.findings}


def test_clean_committed_session_is_delivered(repo: GitRepo) -> None:
    v = check(repo, fixed_session(repo).report())
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert v.checks["tests"].details["counts"]["passed"] == 2
    assert v.done


def test_clean_worktree_session_is_delivered(repo: GitRepo) -> None:
    v = check(repo, fixed_session(repo, commit=False).report())
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert v.checks["changes"].details["mode"] == "worktree"


def test_positional_ids_and_french_status_are_delivered(repo: GitRepo) -> None:
    turns = [
        model_turn(call("read_file", None, path="calc.py")),
        model_turn(
            call(
                "edit_file",
                None,
                path="calc.py",
                old_text="return a + b\n\n\ndef s",
                new_text="return a + b\n\n\ndef s",
            )
        ),
        fix_turns()[1],
        model_turn("Terminé."),
    ]
    session = run_session(
        repo.path, "fr-1", "Corrige.", ScriptedModel(turns), commit=True, status_when_done="terminé"
    )
    v = check(repo, session.report())
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert v.agent_status == "terminé" and v.done


def test_file_left_out_of_the_commit_is_not_delivered(repo: GitRepo) -> None:
    turns = [
        *fix_turns()[:2],
        model_turn(call("write_file", "c3", path="tests/test_more.py", content="x = 1\n")),
        model_turn("Done."),
    ]
    session = run_session(repo.path, "s-miss", "t", ScriptedModel(turns))
    repo.git("commit", "-q", "-a", "-m", "partial")
    session.head_commit = repo.head()
    v = check(repo, session.report())
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert v.first_finding is not None and v.first_finding.code == "change.missing"


def test_edit_applied_to_the_wrong_range_is_not_delivered(repo: GitRepo) -> None:
    session = fixed_session(repo, turns=fix_turns(replacement="    return b - a\n"))
    report = session.report()
    intended = CALC.replace(
        "subtract(a, b):\n    return a + b", "subtract(a, b):\n    return a - b"
    )
    report["changes"][0]["sha256_after"] = sha256(intended.encode())
    v = check(repo, report)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert {"change.hash_mismatch", "audit.effect_mismatch"} <= all_codes(v)


def test_failing_tests_are_not_delivered(repo: GitRepo) -> None:
    v = check(repo, fixed_session(repo, turns=fix_turns(replacement="    return b - a\n")).report())
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert [f.code for f in v.checks["tests"].findings] == ["tests.failed"]
    assert v.checks["changes"].status is CheckStatus.PASS


def test_missing_audit_entry_is_not_delivered(repo: GitRepo) -> None:
    session = fixed_session(repo)
    bodies = [b for b in session.bodies if b.get("call_id") != "c2"]
    v = check(repo, session.report(bodies=bodies))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert {"audit.call_without_entry", "audit.claim_unexplained"} <= all_codes(v)
    assert v.checks["changes"].status is CheckStatus.PASS


def test_undeclared_change_is_not_delivered(repo: GitRepo) -> None:
    fmt = [sys.executable, "-c", "open('NOTES', 'w').write('n')"]
    turns = [*fix_turns()[:2], model_turn(call("run_command", "c9", command=fmt)), fix_turns()[2]]
    session = fixed_session(repo, turns=turns)
    claims = [c for c in session.claims() if c["path"] == "calc.py"]
    v = check(repo, session.report(claims=claims))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert {"change.undeclared", "audit.effect_undeclared"} <= all_codes(v)


def test_calls_without_responses_fail_the_audit(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    contents = report["trajectory"]["contents"]
    report["trajectory"]["contents"] = [
        c for c in contents if not any("function_response" in p for p in c["parts"])
    ]
    v = check(repo, report)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert "audit.response_missing" in all_codes(v)


def test_response_answering_no_call_fails_the_audit(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    report["trajectory"]["contents"][2]["parts"].append(
        {"function_response": {"name": "delete_file", "response": {"ok": True}}}
    )
    v = check(repo, report)
    assert [f.code for f in v.checks["audit"].findings] == ["audit.response_without_call"]


def test_session_end_status_must_match_the_report(repo: GitRepo) -> None:
    session = fixed_session(repo)
    session.bodies[-1]["status"] = "error"
    v = check(repo, session.report())
    assert [f.code for f in v.checks["audit"].findings] == ["audit.status_mismatch"]


def test_unknown_tool_is_reported_not_dropped(repo: GitRepo) -> None:
    turns = [model_turn(call("fetch_url", "w1", url="https://example.invalid")), *fix_turns()]
    v = check(repo, fixed_session(repo, turns=turns).report())
    assert v.checks["audit"].details["unknown_calls"] == ["fetch_url"]
    assert v.delivery_status is DeliveryStatus.DELIVERED


def test_missing_repository_is_inconclusive(repo: GitRepo, tmp_path: Path) -> None:
    report = fixed_session(repo).report()
    v = verify(parse_report(to_bytes(report)), Config(), Options(repo_path=tmp_path / "gone"))
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    assert v.checks["tests"].status is CheckStatus.SKIPPED


def test_the_report_does_not_choose_its_repository(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    report["repo"]["path"] = str(repo.path)  # unregistered name, path given by the report
    v = verify(parse_report(to_bytes(report)), Config())
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    assert "repositories.calc.path" in v.checks["changes"].findings[0].message


def test_missing_test_runner_is_inconclusive(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    v = check(repo, report, options=Options(test_command=("no-such-binary-xyz", "-q")))
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    assert v.checks["tests"].findings[0].code == "tests.runner_not_found"


def test_missing_head_commit_skips_tests_and_fails(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    report["repo"]["head_commit"] = "ab" * 20
    v = check(repo, report)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert v.checks["tests"].status is CheckStatus.SKIPPED


def test_test_command_from_the_report_is_never_used(repo: GitRepo) -> None:
    report = fixed_session(repo, turns=fix_turns(replacement="    return b - a\n")).report()
    report["tests"] = {"command": "true", "exit_code": 0, "summary": "2 passed"}
    v = check(repo, report)
    assert v.checks["tests"].status is CheckStatus.FAIL
    assert "true" not in v.checks["tests"].details["argv"]


def test_verification_json_has_the_documented_keys(repo: GitRepo) -> None:
    data = check(repo, fixed_session(repo).report()).to_dict()
    assert {
        "session_id",
        "agent_status",
        "done",
        "delivery_status",
        "checks",
        "verified_at",
        "verifier_version",
    } <= set(data)
    assert set(data["checks"]) == {"changes", "tests", "audit", "replay"}
    assert data["verified_at"].endswith("Z")


def test_two_calls_sharing_an_id_are_both_audited(repo: GitRepo) -> None:
    """A second call reusing an id cannot hide behind the first call's entry."""
    report = fixed_session(repo).report()
    contents = report["trajectory"]["contents"]
    contents[3]["parts"][0]["function_call"]["id"] = "c1"
    contents[4]["parts"][0]["function_response"]["id"] = "c1"
    v = check(repo, report)
    assert "audit.duplicate_call_id" in all_codes(v)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED


def test_a_call_outside_a_model_turn_is_reported(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    report["trajectory"]["contents"][0]["parts"].append(
        {"function_call": {"name": "delete_file", "args": {"path": "calc.py"}}}
    )
    v = check(repo, report)
    assert [f.code for f in v.checks["audit"].findings] == ["audit.call_outside_model_turn"]


def test_a_response_two_turns_late_is_an_orphan_and_the_call_unanswered(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    contents = report["trajectory"]["contents"]
    late = contents[2]["parts"].pop()
    contents[2]["parts"].append({"text": "(lost)"})
    contents[-1]["parts"].append(late)
    v = check(repo, report)
    codes = {f.code for f in v.checks["audit"].findings}
    assert {"audit.response_without_call", "audit.response_missing"} <= codes


def test_french_end_status_matches_its_canonical_report_status(repo: GitRepo) -> None:
    session = fixed_session(repo)
    session.bodies[-1]["status"] = "terminé"
    v = check(repo, session.report())
    assert v.checks["audit"].findings == ()


def test_an_unknown_tool_profile_leaves_the_session_inconclusive(repo: GitRepo) -> None:
    # Every call is unknown to a profile we do not have: answered as successful, what
    # they did cannot be replayed (issue 8), so the verdict stays open.
    report = fixed_session(repo).report()
    report["agent"]["tool_profile"] = "vendor-x"
    v = check(repo, report)
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    assert v.checks["audit"].details["unknown_calls"] == ["read_file", "replace_lines"]
    assert any("vendor-x" in note for note in v.checks["audit"].notes)
    codes = [f.code for f in v.checks["replay"].findings]
    assert codes == ["profile.unknown_call", "profile.unknown_call"]
    assert any("vendor-x" in note for note in v.checks["replay"].notes)


def test_unknown_trajectory_keys_are_noted_and_counted(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    report["trajectory"]["contents"][0].update({f"future{i}": i for i in range(25)})
    v = check(repo, report)
    assert v.delivery_status is DeliveryStatus.DELIVERED
    assert "ignored unknown key trajectory.contents.0.future0" in v.notes
    assert "and 5 more unknown keys" in v.notes


class SeesTheTask:
    """A check that records the task its context carries, for the test to read."""

    name = "sees_task"
    title = "Sees the task"
    prefixes: Mapping[str, str] = {"sees_task.": "the task probe"}
    reads: tuple[str, ...] = ()
    launches = False

    def __init__(self) -> None:
        self.seen: list[Task | None] = []

    def run(self, context: Context) -> CheckResult:
        self.seen.append(context.task)
        return CheckResult(self.name, CheckStatus.PASS)


def test_the_task_handed_to_verify_is_what_the_checks_read(repo: GitRepo) -> None:
    task = Task("calc-add", repository="calc", fail_to_pass=("tests/test_calc.py::test_add",))
    report = parse_report(to_bytes(fixed_session(repo).report()))
    probe = SeesTheTask()
    v = verify(report, config_for(repo), checks=[*registered(), probe], task=task)
    assert probe.seen == [task]
    assert v.checks["sees_task"].status is CheckStatus.PASS
    # Without one, a check reads None: a report never supplies its own task.
    again = SeesTheTask()
    verify(report, config_for(repo), checks=[*registered(), again])
    assert again.seen == [None]
