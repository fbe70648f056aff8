"""The audit trail against the trajectory's calls and the claimed changes."""

from __future__ import annotations

import copy
import json
import random
import unicodedata
from types import MappingProxyType
from typing import Any

import pytest

from audit import (
    Call,
    Change,
    Finding,
    check_completeness,
    jcs_sha256,
    seal,
    sha256_hex,
    verify_trail,
)
from audit.chain import _Shapes
from tests.support.paths import VECTORS

VECTORS = json.loads((VECTORS / "audit-chain-v1.json").read_text(encoding="utf-8"))
SID = VECTORS["session_id"]
JCS = [case["value"] for case in VECTORS["jcs"]]
PATH = "src/données.py"
A, B, C, D = (f"{n:x}" * 64 for n in (10, 11, 12, 13))


def vector_calls() -> list[Call]:
    return [
        Call("c1", "replace_lines", JCS[0], JCS[2]),
        Call("t3.p0", "run_command", JCS[1], JCS[3]),
    ]


def vector_claims() -> list[Change]:
    (effect,) = VECTORS["entries"][1]["effects"]
    return [Change(effect["path"], effect["sha256_before"], effect["sha256_after"])]


def codes(findings: list[Finding]) -> set[str]:
    return {f.code for f in findings}


def effect(path: str, before: str | None, after: str | None) -> dict[str, Any]:
    return {"path": path, "sha256_before": before, "sha256_after": after}


def call(call_id: str, tool: str = "write_file", **args: Any) -> Call:
    return Call(call_id, tool, args or {"path": call_id}, {"ok": True, "id": call_id})


def entry_for(c: Call, *effects: dict[str, Any], decision: str = "allow") -> dict[str, Any]:
    return {
        "ts": "2026-11-01T10:00:05Z",
        "kind": "tool_call",
        "call_id": c.call_id,
        "tool": c.tool,
        "args_sha256": jcs_sha256(c.args),
        "decision": decision,
        "checkpoint": None,
        "result_sha256": jcs_sha256(c.response) if c.response is not None else "0" * 64,
        "effects": list(effects),
    }


def trail(*bodies: dict[str, Any]) -> list[dict[str, Any]]:
    return seal(
        SID,
        [
            {"kind": "session_start", "ts": "2026-11-01T10:00:00Z"},
            *bodies,
            {"kind": "session_end", "ts": "2026-11-01T10:01:00Z", "status": "done"},
        ],
    )


def audit_of(entries: list[Any]) -> dict[str, Any]:
    return {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]}


# -- the vectors ---------------------------------------------------------------


def test_vector_trail_is_complete_for_its_calls_and_claims() -> None:
    entries = copy.deepcopy(VECTORS["entries"])
    assert check_completeness(entries, vector_calls(), vector_claims()) == []
    assert (
        verify_trail(
            audit_of(entries), session_id=SID, calls=vector_calls(), claims=vector_claims()
        )
        == []
    )


def test_vector_arguments_hash_to_the_recorded_args_sha256() -> None:
    entries = VECTORS["entries"]
    assert [jcs_sha256(c.args) for c in vector_calls()] == [e["args_sha256"] for e in entries[1:3]]
    assert [jcs_sha256(c.response or {}) for c in vector_calls()] == [
        e["result_sha256"] for e in entries[1:3]
    ]


# -- calls and entries, one to one ---------------------------------------------


def test_call_without_entry_is_caught() -> None:
    c1, c2 = call("c1"), call("c2")
    findings = check_completeness(trail(entry_for(c1)), [c1, c2], [])
    assert [(f.code, f.expected) for f in findings] == [("audit.call_without_entry", "c2")]


def test_trail_with_no_tool_call_for_the_calls_is_caught_per_call() -> None:
    calls = [call("c1"), call("c2")]
    findings = check_completeness(trail(), calls, [])
    assert [(f.code, f.expected) for f in findings] == [
        ("audit.call_without_entry", "c1"),
        ("audit.call_without_entry", "c2"),
    ]


def test_entry_without_call_is_caught() -> None:
    c1, c2 = call("c1"), call("c2")
    findings = check_completeness(trail(entry_for(c1), entry_for(c2)), [c1], [])
    assert [(f.code, f.path, f.found) for f in findings] == [
        ("audit.entry_without_call", "audit.entries[2].call_id", "c2")
    ]


def test_second_entry_for_one_call_is_caught_as_duplicate() -> None:
    c1 = call("c1")
    findings = check_completeness(trail(entry_for(c1), entry_for(c1)), [c1], [])
    assert [(f.code, f.path) for f in findings] == [("audit.duplicate_entry", "audit.entries[2]")]


def test_duplicate_call_in_the_trajectory_is_left_to_the_trajectory_check() -> None:
    c1 = call("c1")
    assert check_completeness(trail(entry_for(c1)), [c1, c1], []) == []


def test_entry_naming_another_tool_is_caught() -> None:
    c1 = call("c1", "write_file")
    body = entry_for(c1)
    body["tool"] = "edit_file"
    findings = check_completeness(trail(body), [c1], [])
    assert [(f.code, f.path, f.expected, f.found) for f in findings] == [
        ("audit.tool_mismatch", "audit.entries[1].tool", "write_file", "edit_file")
    ]


def test_entry_with_hash_of_other_arguments_is_caught() -> None:
    c1 = call("c1", path="a.py")
    body = entry_for(c1)
    body["args_sha256"] = jcs_sha256({"path": "b.py"})
    findings = check_completeness(trail(body), [c1], [])
    assert [(f.code, f.path, f.expected) for f in findings] == [
        ("audit.args_mismatch", "audit.entries[1].args_sha256", jcs_sha256({"path": "a.py"}))
    ]


def test_arguments_hashed_without_jcs_sort_order_are_caught() -> None:
    c1 = call("c1", b=1, a=2)
    body = entry_for(c1)
    body["args_sha256"] = sha256_hex(json.dumps({"b": 1, "a": 2}, separators=(",", ":")).encode())
    assert codes(check_completeness(trail(body), [c1], [])) == {"audit.args_mismatch"}


def test_arguments_without_jcs_form_are_caught_as_args_mismatch() -> None:
    c1 = Call("c1", "run_command", {"timeout": float("inf")}, {"ok": True})
    body = entry_for(call("c1", "run_command"))
    body["result_sha256"] = jcs_sha256({"ok": True})
    findings = check_completeness(trail(body), [c1], [])
    assert [(f.code, f.expected) for f in findings] == [("audit.args_mismatch", None)]


def test_call_without_response_is_caught() -> None:
    c1 = Call("c1", "read_file", {"path": "a.py"}, None)
    findings = check_completeness(trail(entry_for(c1)), [c1], [])
    assert [(f.code, f.expected) for f in findings] == [("audit.response_missing", "c1")]


def test_call_without_response_or_entry_is_caught_twice() -> None:
    c1 = Call("c1", "read_file", {"path": "a.py"}, None)
    assert codes(check_completeness(trail(), [c1], [])) == {
        "audit.response_missing",
        "audit.call_without_entry",
    }


def test_entry_with_hash_of_another_response_is_caught() -> None:
    c1 = call("c1")
    body = entry_for(c1)
    body["result_sha256"] = jcs_sha256({"ok": False})
    findings = check_completeness(trail(body), [c1], [])
    assert [(f.code, f.found) for f in findings] == [
        ("audit.result_mismatch", jcs_sha256({"ok": False}))
    ]


def test_read_only_mapping_arguments_hash_like_dicts() -> None:
    args = {"path": "a.py", "opts": {"x": 1}}
    c1 = Call("c1", "read_file", MappingProxyType(args), MappingProxyType({"ok": True}))
    body = entry_for(Call("c1", "read_file", args, {"ok": True}))
    assert check_completeness(trail(body), [c1], []) == []


# -- denied calls --------------------------------------------------------------


@pytest.mark.parametrize("decision", ["deny", "refused"])
def test_denied_call_with_effects_is_caught(decision: str) -> None:
    c1 = call("c1")
    body = entry_for(c1, effect("a.py", A, B), decision=decision)
    findings = check_completeness(trail(body), [c1], [Change("a.py", A, B)])
    assert [(f.code, f.path) for f in findings] == [
        ("audit.denied_with_effects", "audit.entries[1].effects")
    ]


@pytest.mark.parametrize("decision", ["deny", "refused", "confirmed"])
def test_denied_or_confirmed_call_without_effects_passes(decision: str) -> None:
    c1 = call("c1")
    assert check_completeness(trail(entry_for(c1, decision=decision)), [c1], []) == []


# -- effects against claims ----------------------------------------------------


def test_effects_chaining_on_one_path_explain_their_net_change() -> None:
    c1, c2, c3 = call("c1"), call("c2"), call("c3")
    entries = trail(
        entry_for(c1, effect("a.py", A, B)),
        entry_for(c2, effect("b.py", None, C)),
        entry_for(c3, effect("a.py", B, D)),
    )
    claims = [Change("a.py", A, D), Change("b.py", None, C)]
    assert check_completeness(entries, [c1, c2, c3], claims) == []


def test_effects_chaining_within_one_entry_compose_in_order() -> None:
    c1 = call("c1")
    entries = trail(entry_for(c1, effect("a.py", A, B), effect("a.py", B, C)))
    assert check_completeness(entries, [c1], [Change("a.py", A, C)]) == []


def test_effect_starting_from_another_state_is_caught_as_discontinuity() -> None:
    c1, c2 = call("c1"), call("c2")
    entries = trail(entry_for(c1, effect("a.py", A, B)), entry_for(c2, effect("a.py", C, D)))
    findings = check_completeness(entries, [c1, c2], [Change("a.py", A, D)])
    assert [(f.code, f.path, f.expected, f.found) for f in findings] == [
        ("audit.effect_discontinuity", "audit.entries[2].effects[0].sha256_before", B, C)
    ]


def test_file_created_after_deletion_without_gap_passes() -> None:
    c1, c2 = call("c1"), call("c2")
    entries = trail(entry_for(c1, effect("a.py", A, None)), entry_for(c2, effect("a.py", None, B)))
    assert check_completeness(entries, [c1, c2], [Change("a.py", A, B)]) == []


def test_change_undone_later_needs_no_claim() -> None:
    c1, c2 = call("c1"), call("c2")
    entries = trail(entry_for(c1, effect("a.py", A, B)), entry_for(c2, effect("a.py", B, A)))
    assert check_completeness(entries, [c1, c2], []) == []


def test_claim_of_a_change_that_was_undone_is_unexplained() -> None:
    c1, c2 = call("c1"), call("c2")
    entries = trail(entry_for(c1, effect("a.py", A, B)), entry_for(c2, effect("a.py", B, A)))
    findings = check_completeness(entries, [c1, c2], [Change("a.py", A, B)])
    assert [(f.code, f.path, f.expected, f.found) for f in findings] == [
        ("audit.claim_unexplained", "a.py", f"{A} -> {B}", f"no net change ({A} -> {A})")
    ]


def test_claim_without_any_effect_is_unexplained() -> None:
    c1 = call("c1")
    findings = check_completeness(trail(entry_for(c1)), [c1], [Change("a.py", None, A)])
    assert [(f.code, f.path, f.expected, f.found) for f in findings] == [
        ("audit.claim_unexplained", "a.py", f"null -> {A}", "no effect")
    ]


def test_effect_without_claim_is_undeclared() -> None:
    c1 = call("c1")
    entries = trail(entry_for(c1, effect("a.py", A, None)))
    findings = check_completeness(entries, [c1], [])
    assert [(f.code, f.path, f.found) for f in findings] == [
        ("audit.effect_undeclared", "a.py", f"{A} -> null")
    ]


def test_claim_with_other_hashes_than_the_effects_is_a_mismatch() -> None:
    c1 = call("c1")
    entries = trail(entry_for(c1, effect("a.py", A, B)))
    findings = check_completeness(entries, [c1], [Change("a.py", A, C)])
    assert [(f.code, f.path, f.expected, f.found) for f in findings] == [
        ("audit.effect_mismatch", "a.py", f"{A} -> {C}", f"{A} -> {B}")
    ]


def test_path_claimed_twice_is_compared_on_its_first_claim() -> None:
    c1 = call("c1")
    entries = trail(entry_for(c1, effect("a.py", A, B)))
    assert check_completeness(entries, [c1], [Change("a.py", A, B), Change("a.py", A, C)]) == []
    assert codes(
        check_completeness(entries, [c1], [Change("a.py", A, C), Change("a.py", A, B)])
    ) == {"audit.effect_mismatch"}


def test_paths_compare_without_unicode_normalisation() -> None:
    c1 = call("c1")
    nfd = unicodedata.normalize("NFD", PATH)
    assert nfd != PATH
    entries = trail(entry_for(c1, effect(PATH, A, B)))
    findings = check_completeness(entries, [c1], [Change(nfd, A, B)])
    assert [(f.code, f.path) for f in findings] == [
        ("audit.claim_unexplained", nfd),
        ("audit.effect_undeclared", PATH),
    ]


def test_paths_compare_with_case() -> None:
    c1 = call("c1")
    entries = trail(entry_for(c1, effect("README.md", A, B)))
    assert codes(check_completeness(entries, [c1], [Change("readme.md", A, B)])) == {
        "audit.claim_unexplained",
        "audit.effect_undeclared",
    }


def test_effects_of_entry_with_unknown_decision_still_count() -> None:
    c1 = call("c1")
    entries = trail(entry_for(c1, effect("a.py", A, B), decision="maybe"))
    assert check_completeness(entries, [c1], [Change("a.py", A, B)]) == []
    assert codes(check_completeness(entries, [c1], [])) == {"audit.effect_undeclared"}


# -- robustness ------------------------------------------------------------------


def test_malformed_entries_are_skipped_without_raising() -> None:
    c1 = call("c1")
    entries: list[Any] = [
        "not an entry",
        None,
        7,
        ["tool_call"],
        {},
        {"kind": "tool_call"},
        {"kind": "tool_call", "call_id": 3, "effects": [effect("z.py", None, A)]},
        {
            "kind": "tool_call",
            "call_id": "c1",
            "tool": 5,
            "args_sha256": None,
            "result_sha256": ["x"],
            "decision": ["deny"],
            "effects": [
                1,
                None,
                {"path": 1, "sha256_before": None, "sha256_after": A},
                {"path": "a.py", "sha256_before": 2, "sha256_after": A},
                {"path": "b.py"},
                {"path": "c.py", "sha256_before": None, "sha256_after": B},
            ],
        },
        {"kind": "tool_call", "call_id": "c9", "effects": "a.py"},
        {"kind": "session_end", "effects": [effect("d.py", None, A)]},
    ]
    findings = check_completeness(entries, [c1], [Change("c.py", None, B)])
    # The readable effects of a tool_call entry count even when its call id does not.
    assert [(f.code, f.path) for f in findings] == [
        ("audit.entry_without_call", "audit.entries[8].call_id"),
        ("audit.effect_undeclared", "z.py"),
    ]


# -- verify_trail ----------------------------------------------------------------


@pytest.mark.parametrize("audit", [None, [], "trail"])
def test_audit_that_is_not_an_object_is_a_malformed_trail(audit: Any) -> None:
    findings = verify_trail(audit, session_id=SID, calls=vector_calls(), claims=vector_claims())
    assert [(f.code, f.path) for f in findings] == [("audit.trail_malformed", "audit")]


@pytest.mark.parametrize("audit", [{}, {"entries": None}, {"entries": {"0": {}}}])
def test_audit_without_entry_list_is_a_malformed_trail(audit: Any) -> None:
    findings = verify_trail(audit, session_id=SID, calls=vector_calls(), claims=vector_claims())
    assert [(f.code, f.path) for f in findings] == [("audit.trail_malformed", "audit.entries")]


def test_empty_entry_list_reports_empty_trail_and_each_call() -> None:
    audit = {"entries": [], "count": 0, "head": None}
    findings = verify_trail(audit, session_id=SID, calls=vector_calls(), claims=vector_claims())
    assert codes(findings) == {
        "audit.empty_trail",
        "audit.call_without_entry",
        "audit.claim_unexplained",
    }


def test_trail_reports_chain_and_completeness_findings_together() -> None:
    entries = copy.deepcopy(VECTORS["entries"])
    audit = {"entries": entries, "count": 5, "head": VECTORS["audit"]["head"]}
    calls = vector_calls()[:1]
    findings = verify_trail(audit, session_id=SID, calls=calls, claims=vector_claims())
    assert codes(findings) == {"audit.count_mismatch", "audit.entry_without_call"}


def test_missing_count_and_head_are_reported() -> None:
    entries = copy.deepcopy(VECTORS["entries"])
    findings = verify_trail(
        {"entries": entries}, session_id=SID, calls=vector_calls(), claims=vector_claims()
    )
    assert [(f.code, f.found) for f in findings] == [
        ("audit.count_mismatch", "null"),
        ("audit.head_mismatch", "null"),
    ]


# -- property: a trail built honestly from calls and claims holds ------------------


@pytest.mark.parametrize("seed", range(40))
def test_sealed_trail_of_random_session_is_complete(seed: int) -> None:
    rng = random.Random(seed)
    state: dict[str, str | None] = {}
    start: dict[str, str | None] = {}
    calls, bodies = [], []
    for n in range(rng.randrange(8)):
        args = {"path": rng.choice(["a.py", "b/c.py", PATH]), "n": n, "x": rng.random()}
        response = None if rng.random() < 0.1 else {"ok": True, "n": n}
        c = Call(f"t{n}.p0", rng.choice(["write_file", "delete_file"]), args, response)
        decision = rng.choice(["allow", "confirmed", "deny", "refused"])
        effects = []
        if decision in ("allow", "confirmed"):
            for _ in range(rng.randrange(3)):
                path = rng.choice(["a.py", "b/c.py", PATH])
                before = state.get(path, f"{hash((path, 'base')) & (2**256 - 1):064x}")
                start.setdefault(path, before)
                after = rng.choice([None, f"{rng.getrandbits(256):064x}"])
                state[path] = after
                effects.append(effect(path, before, after))
        body = entry_for(c, *effects, decision=decision)
        if response is None:
            body["result_sha256"] = f"{rng.getrandbits(256):064x}"
        calls.append(c)
        bodies.append(body)
    claims = [Change(p, start[p], state[p]) for p in state if start[p] != state[p]]
    rng.shuffle(claims)
    findings = verify_trail(audit_of(trail(*bodies)), session_id=SID, calls=calls, claims=claims)
    missing = sum(c.response is None for c in calls)
    assert [f.code for f in findings] == ["audit.response_missing"] * missing


# -- modes: a change of mode alone -------------------------------------------------------


def mode_effect(path: str, digest: str, before: str, after: str) -> dict[str, Any]:
    return {**effect(path, digest, digest), "mode_before": before, "mode_after": after}


def test_a_mode_only_effect_explains_a_mode_only_claim() -> None:
    c1 = call("c1", "run_command")
    entries = trail(entry_for(c1, mode_effect("run.sh", A, "100644", "100755")))
    claim = Change("run.sh", A, A, "100644", "100755")
    assert verify_trail(audit_of(entries), session_id=SID, calls=[c1], claims=[claim]) == []


def test_a_mode_only_effect_nobody_claims_is_undeclared() -> None:
    c1 = call("c1", "run_command")
    entries = trail(entry_for(c1, mode_effect("run.sh", A, "100644", "100755")))
    [finding] = check_completeness(entries, [c1], [])
    assert (finding.code, finding.path, finding.found) == (
        "audit.effect_undeclared",
        "run.sh",
        f"{A} (100644) -> {A} (100755)",
    )


def test_a_claimed_mode_the_trail_does_not_record_is_a_mismatch() -> None:
    c1 = call("c1", "run_command")
    entries = trail(entry_for(c1, mode_effect("run.sh", A, "100644", "100755")))
    claim = Change("run.sh", A, A, "100644", "120000")
    [finding] = check_completeness(entries, [c1], [claim])
    assert (finding.code, finding.expected) == (
        "audit.effect_mismatch",
        f"{A} (100644) -> {A} (120000)",
    )


def test_a_mode_only_claim_with_a_trail_that_records_no_mode_is_unexplained() -> None:
    """Effects of an older harness give no modes: equal hashes there are no change at all."""
    c1 = call("c1", "run_command")
    entries = trail(entry_for(c1, effect("run.sh", A, A)))
    claim = Change("run.sh", A, A, "100644", "100755")
    assert codes(check_completeness(entries, [c1], [claim])) == {"audit.claim_unexplained"}


def test_a_claim_without_modes_is_held_to_its_hashes_only() -> None:
    """Old reports: a content change whose effect also records a mode change still matches."""
    c1 = call("c1")
    entries = trail(
        entry_for(c1, {**effect("a.py", A, B), "mode_before": "100644", "mode_after": "100755"})
    )
    assert check_completeness(entries, [c1], [Change("a.py", A, B)]) == []


def test_an_effect_starting_from_another_mode_than_the_last_left_is_a_discontinuity() -> None:
    c1, c2 = call("c1", "run_command"), call("c2", "run_command")
    entries = trail(
        entry_for(c1, mode_effect("run.sh", A, "100644", "100755")),
        entry_for(c2, {**effect("run.sh", A, B), "mode_before": "100644", "mode_after": "100644"}),
    )
    claim = Change("run.sh", A, B)
    findings = check_completeness(entries, [c1, c2], [claim])
    assert [(f.code, f.path, f.expected, f.found) for f in findings] == [
        (
            "audit.effect_discontinuity",
            "audit.entries[2].effects[0].mode_before",
            "100755",
            "100644",
        )
    ]


def test_effect_modes_take_the_plain_path_and_a_bad_mode_is_malformed() -> None:
    c1 = call("c1", "run_command")
    good = trail(entry_for(c1, mode_effect("run.sh", A, "100644", "100755")))
    assert (
        verify_trail(
            audit_of(good),
            session_id=SID,
            calls=[c1],
            claims=[Change("run.sh", A, A, "100644", "100755")],
        )
        == []
    )
    assert _Shapes().plain_kind(good[1]) == "tool_call"
    bad = trail(entry_for(c1, mode_effect("run.sh", A, "100644", "777")))
    assert _Shapes().plain_kind(bad[1]) is None
    findings = verify_trail(audit_of(bad), session_id=SID, calls=[c1], claims=[])
    assert ("audit.entry_malformed", "audit.entries[1].effects[0].mode_after") in {
        (f.code, f.path) for f in findings
    }
