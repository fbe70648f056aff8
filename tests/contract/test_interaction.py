"""Trajectories recorded from the Gemini Interactions API (``gemini-interaction``).

The sessions are recorded by the reference harness as ``gemini-contents`` and
converted step by step (`to_interaction`), so each test holds one session in
both formats: the verdict, the checks and the findings must be the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.chain import seal
from audit.jcs import jcs_sha256
from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fix_turns, fixed_session, to_bytes, to_interaction
from verifier import resources
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.app.reportcheck import check_report
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import Limits, parse_document, parse_report
from verifier.errors import InvalidReport
from verifier.findings import DeliveryStatus, Verification
from verifier.verify import Options, verify

SEALED = ("v", "session_id", "seq", "prev", "hash")


def config_for(repo: GitRepo) -> Config:
    repo_cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60
    )
    return Config(repositories={"calc": repo_cfg})


def verdict(repo: GitRepo, report: dict[str, Any]) -> Verification:
    return verify(parse_report(to_bytes(report)), config_for(repo), Options())


def summary(v: Verification) -> tuple[DeliveryStatus, dict[str, str], list[str]]:
    codes = sorted(f.code for r in v.checks.values() for f in r.findings)
    return v.delivery_status, {n: r.status.value for n, r in v.checks.items()}, codes


def test_a_clean_session_is_delivered_in_both_formats(repo: GitRepo) -> None:
    contents = fixed_session(repo).report()
    interaction = to_interaction(contents)
    assert interaction["trajectory"]["interaction"]["steps"][1]["type"] == "function_call"

    as_contents, as_interaction = verdict(repo, contents), verdict(repo, interaction)

    assert as_contents.delivery_status is DeliveryStatus.DELIVERED, as_contents.to_dict()
    assert summary(as_interaction) == summary(as_contents)
    audit = as_interaction.checks["audit"].details
    assert audit["calls"] == 2
    assert audit["actions"] == {"read": 1, "replace": 1}


def test_a_session_without_call_ids_is_delivered_in_both_formats(repo: GitRepo) -> None:
    turns = [
        model_turn(call("read_file", None, path="calc.py")),
        model_turn(call("replace_lines", None, **fix_turns()[1].parts[0].function_call.args)),
        model_turn("Fixed."),
    ]
    session = run_session(repo.path, "s-noid", "Fix.", ScriptedModel(turns), commit=True)
    contents = session.report()
    interaction = to_interaction(contents)
    ids = [s.get("id") for s in interaction["trajectory"]["interaction"]["steps"]]
    assert "t1.p0" in ids and "t3.p0" in ids

    assert summary(verdict(repo, interaction)) == summary(verdict(repo, contents))
    assert verdict(repo, interaction).delivery_status is DeliveryStatus.DELIVERED


def test_a_tampered_result_is_the_same_finding_in_both_formats(repo: GitRepo) -> None:
    contents = fixed_session(repo).report()
    interaction = to_interaction(contents)
    contents["trajectory"]["contents"][4]["parts"][0]["function_response"]["response"] = {"ok": 0}
    steps = interaction["trajectory"]["interaction"]["steps"]
    result = next(s for s in steps if s.get("call_id") == "c2")
    result["result"] = {"ok": 0}

    as_contents, as_interaction = verdict(repo, contents), verdict(repo, interaction)

    assert as_contents.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert "audit.result_mismatch" in summary(as_contents)[2]
    assert summary(as_interaction) == summary(as_contents)


def test_a_wrong_edit_fails_the_tests_in_both_formats(repo: GitRepo) -> None:
    session = fixed_session(repo, turns=fix_turns("    return a * b\n"))
    contents = session.report()

    as_contents, as_interaction = verdict(repo, contents), verdict(repo, to_interaction(contents))

    assert as_contents.checks["tests"].status.value == "fail"
    assert summary(as_interaction) == summary(as_contents)


def test_a_result_without_its_call_id_names_the_step_field(repo: GitRepo) -> None:
    report = to_interaction(fixed_session(repo).report())
    steps = report["trajectory"]["interaction"]["steps"]
    assert steps[3]["type"] == "function_call" and steps[4]["type"] == "function_result"
    del steps[4]["call_id"]

    doc = parse_document(to_bytes(report))  # everything but the trajectory reads
    with pytest.raises(InvalidReport) as info:
        doc.trajectory  # noqa: B018

    assert info.value.field == "trajectory.interaction.steps.4.call_id"
    assert "missing" in info.value.problem


def test_a_call_whose_id_is_not_a_string_names_the_step_field(repo: GitRepo) -> None:
    report = to_interaction(fixed_session(repo).report())
    report["trajectory"]["interaction"]["steps"][3]["id"] = 7

    with pytest.raises(InvalidReport) as info:
        parse_report(to_bytes(report))

    assert info.value.field == "trajectory.interaction.steps.3.id"


def test_a_step_that_is_not_an_object_names_its_index(repo: GitRepo) -> None:
    report = to_interaction(fixed_session(repo).report())
    report["trajectory"]["interaction"]["steps"][2] = "function_call"

    with pytest.raises(InvalidReport) as info:
        parse_report(to_bytes(report))

    assert info.value.field == "trajectory.interaction.steps"
    assert "item 2: expected an object" in info.value.problem


def test_an_unknown_trajectory_format_names_the_format_field(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    report["trajectory"]["format"] = "gemini-interactions"

    with pytest.raises(InvalidReport) as info:
        parse_report(to_bytes(report))

    assert info.value.field == "trajectory.format"
    assert "'gemini-interactions'" in info.value.problem
    assert "'gemini-interaction'" in info.value.problem


def test_unknown_and_server_side_steps_are_kept_raw_and_change_no_verdict(repo: GitRepo) -> None:
    report = to_interaction(fixed_session(repo).report())
    steps = report["trajectory"]["interaction"]["steps"]
    search = {"type": "google_search_call", "id": "g1", "arguments": {"queries": ["sign error"]}}
    future = {"type": "steering_note", "text": "keep going", "weight": 2}
    steps.insert(2, search)
    steps.insert(3, future)
    steps[1]["signature_hint"] = "kept"  # a key the SDK does not know, on a known step

    report_obj = parse_report(to_bytes(report))
    trajectory = report_obj.trajectory
    v = verify(report_obj, config_for(repo), Options())

    assert [(o.index, o.type) for o in trajectory.other_steps] == [
        (2, "google_search_call"),
        (3, "steering_note"),
    ]
    assert trajectory.other_steps[1].raw == future
    assert "trajectory.interaction.steps.1.signature_hint" in trajectory.ignored_keys
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert "ignored unknown key trajectory.interaction.steps.1.signature_hint" in v.notes


def test_steps_make_turns_and_calls_pair_with_results_by_id(repo: GitRepo) -> None:
    report = to_interaction(fixed_session(repo).report())
    steps = report["trajectory"]["interaction"]["steps"]
    steps.insert(
        1,
        {
            "type": "thought",
            "signature": "AQJzaWf_",
            "summary": [{"type": "text", "text": "read first"}],
        },
    )

    trajectory = parse_report(to_bytes(report)).trajectory

    assert [c.role for c in trajectory.contents] == [
        "user",
        "model",
        "user",
        "model",
        "user",
        "model",
    ]
    thought = trajectory.contents[1].parts[0]
    assert thought.thought and thought.thought_signature == b"\x01\x02sig\xff"
    assert [(c.call_id, c.turn, c.part) for c in trajectory.calls] == [("c1", 1, 1), ("c2", 3, 0)]
    assert all(c.response is not None for c in trajectory.calls)
    assert trajectory.location(1, 1) == "trajectory.interaction.steps.2"
    assert trajectory.location(3, 0) == "trajectory.interaction.steps.4"


def test_a_text_result_is_hashed_as_an_object_and_is_error_is_kept(repo: GitRepo) -> None:
    """A result that is not an object is the response ``{"result": <result>}``."""
    report = to_interaction(fixed_session(repo).report())
    first = next(
        s for s in report["trajectory"]["interaction"]["steps"] if s.get("call_id") == "c1"
    )
    first["result"] = "def add(a, b): ..."
    first["is_error"] = False
    bodies = [{k: v for k, v in e.items() if k not in SEALED} for e in report["audit"]["entries"]]
    entry = next(b for b in bodies if b.get("call_id") == "c1")
    entry["result_sha256"] = jcs_sha256({"result": "def add(a, b): ..."})
    trail = seal(report["session_id"], bodies)
    report["audit"] = {"entries": trail, "count": len(trail), "head": trail[-1]["hash"]}

    raw = to_bytes(report)
    checked = check_report(raw, resources.profiles_dir())
    trajectory = parse_report(raw).trajectory

    assert checked.findings == ()
    assert trajectory.calls[0].response_object == {"result": "def add(a, b): ..."}
    assert trajectory.calls[0].is_error is False
    assert trajectory.calls[1].is_error is None


def test_a_result_that_answers_no_call_is_an_orphan_found_by_the_audit_check(
    repo: GitRepo,
) -> None:
    report = to_interaction(fixed_session(repo).report())
    steps = report["trajectory"]["interaction"]["steps"]
    steps.append({"type": "function_result", "call_id": "c9", "name": "read_file", "result": {}})

    checked = check_report(to_bytes(report), resources.profiles_dir())
    trajectory = parse_report(to_bytes(report)).trajectory

    assert [f.code for f in checked.findings] == ["audit.response_without_call"]
    (orphan,) = trajectory.orphan_responses
    where = f"trajectory.interaction.steps.{len(steps) - 1}"
    assert trajectory.location(orphan.turn, orphan.part) == where
    # The audit check's finding points at the step, not at a `contents` the report lacks.
    (finding,) = checked.findings
    assert finding.path == where


def test_the_schema_accepts_both_formats(repo: GitRepo, tmp_path: Path) -> None:
    """The published schema knows the format (the drift test keeps it equal to the models)."""
    schema = json.loads(resources.report_schema_file().read_text())
    formats = {
        d["properties"]["format"].get("const")
        for d in schema["$defs"].values()
        if "format" in d.get("properties", {})
    }
    assert {"gemini-contents", "gemini-interaction"} <= formats
    assert "steps" in schema["$defs"]["InteractionDoc"]["required"]


def test_a_thought_signature_that_is_not_base64_names_the_step_field(repo: GitRepo) -> None:
    report = to_interaction(fixed_session(repo).report())
    report["trajectory"]["interaction"]["steps"].insert(1, {"type": "thought", "signature": "no!"})

    with pytest.raises(InvalidReport) as info:
        parse_report(to_bytes(report))

    assert info.value.field == "trajectory.interaction.steps.1.signature"
    assert "not base64" in info.value.problem


def test_more_steps_than_the_limit_are_refused_before_validation(repo: GitRepo) -> None:
    report = to_interaction(fixed_session(repo).report())
    steps = len(report["trajectory"]["interaction"]["steps"])

    with pytest.raises(InvalidReport) as info:
        parse_document(to_bytes(report), Limits(parts=steps - 1))

    assert info.value.field == "trajectory.interaction.steps"
    assert f"holds {steps} items" in info.value.problem
    assert parse_document(to_bytes(report), Limits(parts=steps)).session_id == "s-1"
