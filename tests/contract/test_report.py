"""The contract: what reads as a report v1, and the clear errors for what does not."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.paths import ROOT
from tests.support.sessions import fixed_session, to_bytes
from verifier.contract.report import (
    LIMITS,
    canonical_status,
    json_schema,
    parse_report,
    schema_text,
)
from verifier.errors import InvalidReport


@pytest.fixture
def report(repo: GitRepo) -> dict[str, Any]:
    return fixed_session(repo).report()


def _invalid(data: Any) -> InvalidReport:
    raw = data if isinstance(data, bytes) else to_bytes(data)
    with pytest.raises(InvalidReport) as info:
        parse_report(raw)
    return info.value


def test_a_harness_report_parses_and_keeps_its_bytes(report: dict[str, Any]) -> None:
    raw = to_bytes(report)
    parsed = parse_report(raw)
    assert parsed.raw == raw
    assert parsed.session_id == "s-1"
    assert parsed.done
    assert [c.call_id for c in parsed.trajectory.calls] == ["c1", "c2"]
    assert parsed.trajectory.calls[1].response_object == {"ok": True}


def test_not_json_names_the_position() -> None:
    error = _invalid(b'{"schema_version": "1",')
    assert error.field == "$"
    assert "not JSON" in error.problem and "line 1" in error.problem


def test_not_utf8_is_refused() -> None:
    assert "UTF-8" in _invalid(b'{"a": "\xff"}').problem


def test_a_json_array_is_not_a_report() -> None:
    assert "object" in _invalid(b"[]").problem


def test_missing_field_is_named(report: dict[str, Any]) -> None:
    del report["repo"]["base_commit"]
    error = _invalid(report)
    assert error.field == "repo.base_commit"
    assert "missing" in error.problem


def test_wrong_type_is_named_with_what_was_found(report: dict[str, Any]) -> None:
    report["changes"] = {"path": "calc.py"}
    error = _invalid(report)
    assert error.field == "changes"
    assert "list" in error.problem


def test_unknown_schema_version_is_refused(report: dict[str, Any]) -> None:
    report["schema_version"] = "2"
    error = _invalid(report)
    assert error.field == "schema_version"
    assert "'2'" in error.problem


def test_missing_schema_version_is_refused(report: dict[str, Any]) -> None:
    del report["schema_version"]
    assert _invalid(report).field == "schema_version"


def test_bad_session_id_is_refused(report: dict[str, Any]) -> None:
    report["session_id"] = "has space"
    assert _invalid(report).field == "session_id"


def test_a_report_names_its_task_and_one_without_reads_as_before(report: dict[str, Any]) -> None:
    """The task fields are optional: a report written before them is valid as it was."""
    assert "task_id" not in report
    before = parse_report(to_bytes(report)).doc
    assert (before.task_id, before.task_read_only) == (None, None)
    report.update(task_id="calc-7", task_read_only=True)
    after = parse_report(to_bytes(report)).doc
    assert (after.task_id, after.task_read_only) == ("calc-7", True)


@pytest.mark.parametrize(
    ("field", "value"),
    [("task_id", "has space"), ("task_id", ""), ("task_id", 7), ("task_read_only", "yes")],
)
def test_a_bad_task_field_is_refused_naming_it(
    report: dict[str, Any], field: str, value: Any
) -> None:
    report[field] = value
    assert _invalid(report).field == field


def test_uppercase_claim_hash_is_a_wrong_type(report: dict[str, Any]) -> None:
    report["changes"][0]["sha256_after"] = report["changes"][0]["sha256_after"].upper()
    assert _invalid(report).field == "changes.0.sha256_after"


def test_claimed_modes_are_optional_and_must_be_git_modes(report: dict[str, Any]) -> None:
    """A report without modes reads as before; a mode git never writes is refused by name."""
    assert parse_report(to_bytes(report)).doc.changes[0].mode_after is None
    report["changes"][0].update(mode_before="100644", mode_after="100755")
    parsed = parse_report(to_bytes(report)).doc.changes[0]
    assert (parsed.mode_before, parsed.mode_after) == ("100644", "100755")
    report["changes"][0]["mode_after"] = "100664"
    assert _invalid(report).field == "changes.0.mode_after"


def test_unknown_keys_are_kept_not_refused(report: dict[str, Any]) -> None:
    report["vendor_field"] = {"x": 1}
    report["repo"]["mirror"] = "elsewhere"
    parsed = parse_report(to_bytes(report))
    assert parsed.doc.model_extra == {"vendor_field": {"x": 1}}
    assert b"vendor_field" in parsed.raw


def test_a_50_mb_report_is_read(report: dict[str, Any]) -> None:
    report["final_text"] = "x" * (50 * 1024 * 1024)
    raw = to_bytes(report)
    assert len(raw) > 50 * 1024 * 1024
    parsed = parse_report(raw)
    assert parsed.doc.final_text is not None and len(parsed.doc.final_text) == 50 * 1024 * 1024


def test_a_report_over_the_limit_is_refused_before_parsing() -> None:
    from verifier.contract import report as contract

    raw = b" " * (contract.MAX_REPORT_BYTES + 1)
    assert "over the limit" in _invalid(raw).problem


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("done", "done"),
        ("terminé", "done"),
        ("tours épuisés", "turns_exhausted"),
        ("budget épuisé", "budget_exhausted"),
        ("boucle détectée", "loop_detected"),
        ("délai dépassé", "timeout"),
        ("cancelled", "cancelled"),
        ("finished-ish", "finished-ish"),
    ],
)
def test_status_aliases(raw: str, canonical: str) -> None:
    assert canonical_status(raw) == canonical


@pytest.mark.parametrize(
    ("status", "done"),
    [("done", True), ("terminé", True), ("Done", False), ("error", False), ("ok", False)],
)
def test_only_done_and_termine_count_as_done(
    report: dict[str, Any], status: str, done: bool
) -> None:
    report["status"] = status
    assert parse_report(to_bytes(report)).done is done


def test_timestamps_must_carry_a_zone(report: dict[str, Any]) -> None:
    report["started_at"] = "2026-11-29T10:00:00"
    assert _invalid(report).field == "started_at"


@pytest.mark.parametrize(
    "committed",
    ["docs/contract/session-report-v1.schema.json", "verifier/contract/report.schema.json"],
    ids=["published", "packaged"],
)
def test_committed_schema_matches_the_models(committed: str) -> None:

    text = (ROOT / committed).read_text("utf-8")
    assert text == schema_text(), f"run `make schema` and commit {committed}"


def _objects(schema: Any, where: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every JSON object in `schema`, with its JSON Pointer, the root first."""
    if isinstance(schema, dict):
        yield where, schema
        for key, value in schema.items():
            yield from _objects(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for n, value in enumerate(schema):
            yield from _objects(value, f"{where}/{n}")


def _undescribed(schema: dict[str, Any]) -> list[str]:
    """Where in `schema` a property of an object has no description, or an empty one."""
    return [
        f"{where}/properties/{name}"
        for where, node in _objects(schema)
        if isinstance(node.get("properties"), dict)
        for name, prop in node["properties"].items()
        if not str(prop.get("description") or "").strip()
    ]


def test_every_property_of_the_schema_is_described() -> None:
    """The schema is the harness author's manual: each field says what it means."""
    schema = json_schema()
    assert len(schema["$defs"]) >= 9  # the nested objects are walked too
    assert _undescribed(schema) == []


@pytest.mark.parametrize("blank", [None, "", "  "])
def test_a_property_without_a_description_is_found(blank: str | None) -> None:
    schema = json_schema()
    change = schema["$defs"]["ClaimedChange"]["properties"]["mode_after"]
    if blank is None:
        del change["description"]
    else:
        change["description"] = blank
    del schema["properties"]["session_id"]["description"]
    assert sorted(_undescribed(schema)) == [
        "#/$defs/ClaimedChange/properties/mode_after",
        "#/properties/session_id",
    ]


def test_every_model_of_the_schema_is_described() -> None:
    schema = json_schema()
    models = {"#": schema, **{f"#/$defs/{k}": v for k, v in schema["$defs"].items()}}
    assert [where for where, model in models.items() if not model.get("description")] == []


def test_descriptions_are_paragraphs_not_source_lines() -> None:
    """A docstring's line breaks are the source's: the schema's readers wrap the text."""
    texts = [
        node["description"]
        for _, node in _objects(json_schema())
        if isinstance(node.get("description"), str)
    ]
    assert len(texts) > 60
    assert [t for t in texts if "\n" in t.replace("\n\n", "")] == []
    assert any("\n\n" in t for t in texts)  # paragraphs stay apart


def test_descriptions_state_the_limits_the_reader_enforces() -> None:
    schema = json_schema()
    described = {
        "changes": schema["properties"]["changes"],
        "contents": schema["$defs"]["TrajectoryDoc"]["properties"]["contents"],
        "steps": schema["$defs"]["InteractionDoc"]["properties"]["steps"],
        "entries": schema["$defs"]["AuditDoc"]["properties"]["entries"],
    }
    assert f"At most {LIMITS.changes:,}." in described["changes"]["description"]
    assert (
        f"At most {LIMITS.contents:,} contents and {LIMITS.parts:,} parts"
        in described["contents"]["description"]
    )
    assert f"At most {LIMITS.parts:,} steps." in described["steps"]["description"]
    assert f"At most {LIMITS.audit_entries:,} entries." in described["entries"]["description"]


def test_schema_requires_the_contract_fields() -> None:
    schema = json.loads(schema_text())
    assert set(schema["required"]) >= {
        "schema_version",
        "session_id",
        "agent",
        "repo",
        "started_at",
        "ended_at",
        "status",
        "changes",
        "trajectory",
        "audit",
    }


def test_report_object_is_frozen(report: dict[str, Any]) -> None:
    parsed = parse_report(to_bytes(report))
    with pytest.raises(ValueError):
        parsed.doc.status = "error"  # type: ignore[misc]
    # the parsed form does not share state with the input dict
    again = copy.deepcopy(report)
    again["status"] = "error"
    assert parsed.doc.status == "done"


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b'{"a": NaN}', "NaN is not a JSON value"),
        (b'{"a": -Infinity}', "-Infinity is not a JSON value"),
        (b'{"a": 1, "a": 2}', "the key 'a' appears twice"),
        (b'{"a": ' + b"9" * 5000 + b"}", "not readable JSON"),
        (b"[" * 5_000 + b"]" * 5_000, "nested too deeply"),
    ],
)
def test_what_python_json_accepts_but_json_does_not_is_refused(raw: bytes, problem: str) -> None:
    assert problem in _invalid(raw).problem


def test_a_lone_surrogate_names_its_field(report: dict[str, Any]) -> None:
    raw = to_bytes(report).replace(b'"path": "calc.py"', b'"path": "calc\\ud800.py"', 1)
    error = _invalid(raw)
    assert error.field == "changes.0.path"
    assert "surrogate" in error.problem


def test_a_surrogate_pair_escape_is_fine(report: dict[str, Any]) -> None:
    raw = to_bytes(report).replace(b'"task": "Fix subtract."', b'"task": "Fix \\ud83d\\ude00"', 1)
    assert parse_report(raw).doc.task == "Fix \U0001f600"


@pytest.mark.parametrize(
    ("field", "value"),
    [("count", "4"), ("count", 4.0)],
)
def test_audit_count_must_be_a_json_integer(report: dict[str, Any], field: str, value: Any) -> None:
    report["audit"][field] = value
    assert _invalid(report).field == f"audit.{field}"


@pytest.mark.parametrize("value", [1764410400, "2026-11-29T10:00:00+02:00"])
def test_timestamps_must_be_utc_strings(report: dict[str, Any], value: Any) -> None:
    report["ended_at"] = value
    assert _invalid(report).field == "ended_at"


@pytest.mark.parametrize("page", ["docs/contract/session-report-v1.md", "docs/report.md"])
def test_relative_links_of_the_contract_and_its_summary_resolve(page: str) -> None:
    import re

    path = ROOT / page
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text("utf-8"))
    assert targets
    missing = [t for t in targets if not (path.parent / t).exists()]
    assert not missing, f"{page} links to files that do not exist: {missing}"


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("agent.name", lambda d: d["agent"].update(name="repo\u0000fixer")),
        ("agent.model", lambda d: d["agent"].update(model="m\u0000")),
        ("repo.branch", lambda d: d["repo"].update(branch="fix\u0000")),
        ("status", lambda d: d.update(status="do\u0000ne")),
    ],
)
def test_nul_in_a_stored_text_field_is_refused_naming_it(field: str, edit: Any) -> None:
    """PostgreSQL text cannot hold U+0000: the contract refuses it, the store never sees it."""
    from tests.support.report_factory import report_dict

    change = {"path": "a.py", "action": "create", "sha256_before": None, "sha256_after": "a" * 64}
    doc = report_dict("s-nul", changes=[change])
    parse_report(json.dumps(doc).encode())  # valid without the NUL
    edit(doc)
    with pytest.raises(InvalidReport) as caught:
        parse_report(json.dumps(doc).encode())
    assert caught.value.field == field and "NUL" in caught.value.problem


CONTROLS = ["\x00", "\t", "\n", "\r", "\x1b", "\x1f", "\x7f", "\x80", "\u0085", "\x9f"]


@pytest.mark.parametrize("char", [*CONTROLS, "\u2028", "\u2029"])
def test_a_claimed_path_with_a_control_character_is_refused_naming_the_claim(
    char: str,
) -> None:
    from tests.support.report_factory import report_dict

    changes = [
        {"path": f"f{n}.py", "action": "create", "sha256_before": None, "sha256_after": "a" * 64}
        for n in range(3)
    ]
    doc = report_dict("s-ctl", changes=changes)
    parse_report(json.dumps(doc).encode())  # valid with ordinary paths
    changes[2]["path"] = f"src/a{char}::error::x.py"
    error = _invalid(json.dumps(doc).encode())
    assert error.field == "changes.2.path"
    assert error.problem.startswith(f"control character U+{ord(char):04X} at offset 5 ")


@pytest.mark.parametrize(
    "path", ["src/é/日本.py", "a b/c.py", "odd\u202ename.py", "weird\u00a0space", "x::y.py"]
)
def test_a_claimed_path_without_control_characters_still_reads(path: str) -> None:
    from tests.support.report_factory import report_dict

    change = {"path": path, "action": "create", "sha256_before": None, "sha256_after": "a" * 64}
    parsed = parse_report(json.dumps(report_dict("s-ok", changes=[change])).encode())
    assert parsed.doc.changes[0].path == path


def test_the_schemas_path_pattern_refuses_what_the_contract_refuses() -> None:
    import re

    pattern = json_schema()["$defs"]["ClaimedChange"]["properties"]["path"]["pattern"]
    for char in [*CONTROLS, "\u2028", "\u2029"]:
        assert re.search(pattern, f"a{char}b") is None
    for path in ["src/é.py", "odd\u202ename.py", "a b"]:
        assert re.search(pattern, path) is not None
