"""The gate's formats, each alone: pure functions of a `Decision`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from tests.support.gate import sarif_schema_errors
from verifier.app.gate import (
    Decision,
    GateSelection,
    GateSession,
    StandingOverride,
    Verdict,
    decide,
)
from verifier.findings import Finding
from verifier.formats.gate import (
    GITHUB_PER_KIND,
    Annotation,
    escape_data,
    escape_property,
    github_annotations,
    render_github,
    render_json,
    render_junit,
    render_markdown,
    render_sarif,
    render_text,
    workflow_command,
)

HEAD = "9a2e" * 10
SELECTION = GateSelection(commits=(HEAD,))


def session(
    session_id: str,
    status: str,
    findings: tuple[Finding, ...] = (),
    override: StandingOverride | None = None,
) -> GateSession:
    return GateSession(
        session_id=session_id,
        computed_status=status,
        override=override,
        repo_name="calc",
        head_commit=HEAD,
        branch="agent/fix",
        findings=findings,
    )


MISSING_FILE = Finding("change.missing", "calc.py is not at head", "calc.py", "9f86", "absent")
GAP = Finding("audit.seq_gap", "seq 3 follows 1", "audit.entries[2].seq", "2", "3")


def test_workflow_commands_escape_data_and_properties_as_actions_core_does() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a,b: 5%\n") == "a%2Cb%3A 5%25%0A"
    command = workflow_command(
        Annotation("error", "t: x, y", "line 1\nline 2 100%", file="src/a,b:c.py", line=7)
    )
    assert (
        command == "::error file=src/a%2Cb%3Ac.py,line=7,title=t%3A x%2C y::line 1%0Aline 2 100%25"
    )
    # Without a file or line, the properties are left out, not left empty.
    assert workflow_command(Annotation("notice", "t", "m")) == "::notice title=t::m"


def test_github_annotations_are_capped_at_ten_of_each_kind_and_say_how_many_are_left_out() -> None:
    many = tuple(
        Finding("change.missing", f"f{i}.py is not at head", f"f{i}.py") for i in range(25)
    )
    sessions = [
        session("blocking", "not_delivered", many),
        session(
            "unsure", "inconclusive", tuple(Finding("tests.no_command", f"n{i}") for i in range(12))
        ),
        *(
            session(
                f"ok{i}",
                "not_delivered",
                (MISSING_FILE,),
                StandingOverride("delivered", "bo", "why"),
            )
            for i in range(3)
        ),
    ]
    decision = decide(sessions, SELECTION, inconclusive="pass")
    assert len(github_annotations(decision)) == 25 + 12 + 3
    output = render_github(decision)
    levels = [a.level for a in output.annotations]
    assert levels.count("error") == GITHUB_PER_KIND
    assert levels.count("warning") == GITHUB_PER_KIND
    assert levels.count("notice") == 3
    assert len(output.annotations) <= 50  # GitHub's limit per job
    assert output.left_out == {"error": 16, "warning": 3}
    errors = [a for a in output.annotations if a.level == "error"]
    assert errors[-1].title == "16 more error annotations left out"
    assert [a.file for a in errors[:9]] == [f"f{i}.py" for i in range(9)]
    commands = [line for line in output.stdout.splitlines() if line.startswith("::")]
    token = output.end_token
    assert len(commands) == len(output.annotations) + 2  # and stop-commands, and its end
    assert commands[-2:] == [f"::stop-commands::{token}", f"::{token}::"]
    assert "16 error annotations left out (GitHub shows 10 per step)" in output.stdout
    # The summary still lists every session.
    assert all(f"<code>{s.session_id}</code>" in output.summary for s in sessions)


def test_an_audit_finding_has_no_file_annotation_its_path_is_a_place_in_the_report() -> None:
    decision = decide([session("s1", "not_delivered", (GAP, MISSING_FILE))], SELECTION)
    [gap, missing] = github_annotations(decision)
    assert gap.file is None and missing.file == "calc.py"
    assert gap.message == "seq 3 follows 1\nexpected: 2\nfound: 3"


def test_junit_has_one_testcase_per_session_and_holds_any_text_as_valid_xml() -> None:
    odd = Finding("change.missing", 'a "quoted" <tag> & \x1b[31mred\x00 ]]>', "a\x07.py")
    decision = decide(
        [
            session("s&1", "not_delivered", (odd,)),
            session("s2", "inconclusive", (Finding("tests.no_command", "none"),)),
            session("s3", "pending"),
            session("s4", "delivered"),
        ],
        SELECTION,
        inconclusive="pass",
    )
    root = ET.fromstring(render_junit(decision))
    [suite] = root.findall("testsuite")
    assert (
        suite.get("tests"),
        suite.get("failures"),
        suite.get("errors"),
        suite.get("skipped"),
    ) == (
        "4",
        "1",
        "0",
        "2",
    )
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["s&1", "s2", "s3", "s4"]
    failure = cases["s&1"].find("failure")
    assert failure is not None
    assert 'a "quoted" <tag> & \\x1b[31mred\\x00 ]]>' in (failure.get("message") or "")
    assert cases["s2"].find("skipped") is not None and cases["s3"].find("skipped") is not None
    assert cases["s4"].find("failure") is None and cases["s4"].find("skipped") is None

    blocking = decide([session("s2", "inconclusive")], SELECTION)
    [case] = ET.fromstring(render_junit(blocking)).iter("testcase")
    error = case.find("error")
    assert error is not None and error.get("type") == "inconclusive"


def test_junit_of_an_empty_selection_fails_unless_allowed() -> None:
    [case] = ET.fromstring(render_junit(decide([], SELECTION))).iter("testcase")
    assert case.get("name") == "selection"
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "no_session"
    allowed = ET.fromstring(render_junit(decide([], SELECTION, allow_empty=True)))
    assert list(allowed.iter("testcase")) == [] and allowed.get("tests") == "0"


def test_sarif_is_valid_with_one_rule_per_code_and_locations_where_a_file_is_named() -> None:
    spaced = Finding("replay.mismatch", "differs", "src/my file#1.py", "aa", "bb")
    decision = decide(
        [
            session("s1", "not_delivered", (MISSING_FILE, GAP, spaced)),
            session("s2", "not_delivered", (MISSING_FILE,)),
            session("s3", "pending"),
            session(
                "s4", "not_delivered", (MISSING_FILE,), StandingOverride("delivered", "bo", "moved")
            ),
            session("s5", "delivered"),
        ],
        SELECTION,
    )
    document = json.loads(render_sarif(decision))
    assert sarif_schema_errors(document) == []
    assert document["version"] == "2.1.0"
    [run] = document["runs"]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules == ["audit.seq_gap", "change.missing", "gate.pending", "replay.mismatch"]
    results = run["results"]
    assert [(r["ruleId"], r["properties"]["session_id"]) for r in results] == [
        ("change.missing", "s1"),
        ("audit.seq_gap", "s1"),
        ("replay.mismatch", "s1"),
        ("change.missing", "s2"),
        ("gate.pending", "s3"),
        ("change.missing", "s4"),
    ]
    for result in results:
        assert rules[result["ruleIndex"]] == result["ruleId"]
    uri = results[2]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "src/my%20file%231.py"
    assert results[1]["locations"] == [
        {"logicalLocations": [{"fullyQualifiedName": "audit.entries[2].seq", "kind": "element"}]}
    ]
    assert "locations" not in results[4]
    # The override lets s4 through: its finding stays, suppressed with the reason.
    assert results[5]["level"] == "note"
    assert results[5]["suppressions"] == [
        {"kind": "external", "status": "accepted", "justification": "moved"}
    ]
    assert [r["level"] for r in results[:5]] == ["error"] * 5
    # The same finding of the same session keeps its fingerprint from one run to the next.
    again = json.loads(render_sarif(decision))["runs"][0]["results"]
    assert [r["partialFingerprints"] for r in again] == [r["partialFingerprints"] for r in results]
    assert len({r["partialFingerprints"]["verifierFinding/v1"] for r in results}) == 6


def test_sarif_of_an_empty_selection_has_a_result_saying_so() -> None:
    document = json.loads(render_sarif(decide([], SELECTION)))
    assert sarif_schema_errors(document) == []
    [result] = document["runs"][0]["results"]
    assert result["ruleId"] == "gate.no_session"
    assert (
        json.loads(render_sarif(decide([], SELECTION, allow_empty=True)))["runs"][0]["results"]
        == []
    )


def test_markdown_cells_let_no_pipe_newline_or_html_through() -> None:
    finding = Finding("change.missing", "a | b\nc <script>x</script>", "p|q.py")
    text = render_markdown(decide([session("s|1", "not_delivered", (finding,))], SELECTION))
    [row] = [line for line in text.splitlines() if line.startswith("| ❌")]
    assert row.count(" | ") == 5  # six cells: no pipe from the data split it
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "s\\|1" in row and "a \\| b c &lt;script" in row


def test_text_says_when_an_override_decided_and_keeps_the_computed_verdict() -> None:
    decision = decide(
        [
            session(
                "s1",
                "not_delivered",
                (MISSING_FILE,),
                StandingOverride("delivered", "alice", "moved"),
            )
        ],
        SELECTION,
    )
    text = render_text(decision, width=200)
    assert "delivered (override; computed: not delivered)" in text
    assert "override delivered by alice: moved" in text
    assert (
        "gate: passed (exit 0): 1 of 1 session delivered; 1 session decided by an override" in text
    )


def _rich_table(rows: list[tuple[str, ...]], width: int) -> list[str]:
    """The table as rich lays it out (what the text view printed before its own writer)."""
    import io

    from rich.console import Console
    from rich.table import Table

    out = io.StringIO()
    console = Console(file=out, highlight=False, no_color=True, width=width)
    table = Table("session", "head", "verdict", "decided by", "first finding")
    table.columns[0].overflow = "fold"
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return out.getvalue().splitlines()


def test_the_text_table_is_the_one_rich_draws_when_it_fits() -> None:
    wide = Finding("change.missing", "gone", "src/データ.py")  # wide characters: two columns
    sessions = [
        session("s-1", "delivered"),
        session("s-2-with-a-longer-id", "not_delivered", (wide,)),
        session("s-3", "inconclusive", (GAP,)),
        GateSession.missing("s-4"),
    ]
    text = render_text(decide(sessions, SELECTION), width=120).splitlines()
    want = _rich_table(
        [
            ("s-1", HEAD[:12], "delivered", "verifier", ""),
            ("s-2-with-a-longer-id", HEAD[:12], "not delivered", "verifier",
             "change.missing src/データ.py"),
            ("s-3", HEAD[:12], "inconclusive", "verifier", "audit.seq_gap audit.entries[2].seq"),
            ("s-4", "-", "not stored", "verifier", ""),
        ],
        120,
    )  # fmt: skip
    assert text[1 : 1 + len(want)] == want


def test_a_table_too_wide_is_shrunk_by_rich_and_a_long_line_is_never_wrapped() -> None:
    long = Finding("change.missing", "x" * 300, "calc.py")
    decision = decide([session("s-1", "not_delivered", (long,))], SELECTION)
    lines = render_text(decision, width=40).splitlines()
    table = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert table == _rich_table([("s-1", HEAD[:12], "not delivered", "verifier",
                                  "change.missing calc.py")], 40)  # fmt: skip
    assert f"  - change.missing calc.py: {'x' * 300}" in lines  # one line, however long


def test_json_and_sarif_are_the_bytes_json_dumps_writes_whatever_the_text() -> None:
    """Written by orjson for speed, escaped to ASCII as json.dumps escapes: the same bytes,
    for non-ASCII, non-BMP and control characters, and a lone surrogate (json.dumps's)."""
    import json

    from verifier.formats.gate import decision_dict
    from verifier.formats.render import inert_json

    for text in ("plain", "é ü", "😀 \U0010ffff", "\x00\x1b\n\u2028", "lone \ud800", "##[x"):
        finding = Finding("change.missing", text, text, text, None)
        decision = decide([session(f"s-{text}", "not_delivered", (finding,))], SELECTION)
        want = inert_json(json.dumps(decision_dict(decision), ensure_ascii=True, indent=2))
        assert render_json(decision) == want + "\n"
        sarif = render_sarif(decision)
        # Read back and written again by json.dumps: the very same bytes.
        again = json.dumps(json.loads(sarif), ensure_ascii=True, indent=2)
        assert sarif == inert_json(again) + "\n"


def _junit_by_elementtree(decision: Decision) -> str:
    """The junit format as it was written with ElementTree (a tree, `ET.indent`,
    `ET.tostring`): what `render_junit`, written as text, must equal byte for byte."""
    from verifier.formats.gate import (
        _session_headline,
        _session_lines,
        _xml_text,
        describe_selection,
        next_steps,
        summary_line,
    )

    suites = ET.Element("testsuites", name="verifier gate")
    suite = ET.SubElement(suites, "testsuite", name="verifier gate")
    tests = failures = errors = skipped = 0
    for d in decision.sessions:
        s = d.session
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"verifier.gate.{_xml_text(s.repo_name or 'unknown')}",
            name=_xml_text(s.session_id),
        )
        tests += 1
        detail = _xml_text("\n".join(_session_lines(d)))
        message = _xml_text(_session_headline(d))
        if d.verdict is Verdict.FAIL:
            failures += 1
            ET.SubElement(case, "failure", message=message, type=d.status).text = detail
        elif d.verdict is Verdict.UNDECIDED and d.blocks:
            errors += 1
            ET.SubElement(case, "error", message=message, type=d.status).text = detail
        elif d.verdict is Verdict.UNDECIDED:
            skipped += 1
            ET.SubElement(case, "skipped", message=message).text = detail
        else:
            ET.SubElement(case, "system-out").text = detail
    if decision.unavailable is not None:
        case = ET.SubElement(suite, "testcase", classname="verifier.gate", name="source")
        tests += 1
        errors += 1
        ET.SubElement(
            case, "error", message=_xml_text(decision.reason), type="unavailable"
        ).text = _xml_text("\n".join(next_steps(decision)))
    elif not decision.sessions and not decision.allow_empty:
        case = ET.SubElement(suite, "testcase", classname="verifier.gate", name="selection")
        tests += 1
        failures += 1
        text = f"no session selected by {describe_selection(decision)}"
        ET.SubElement(case, "failure", message=_xml_text(text), type="no_session")
    for element in (suites, suite):
        element.set("tests", str(tests))
        element.set("failures", str(failures))
        element.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    ET.SubElement(suite, "system-out").text = _xml_text(summary_line(decision))
    ET.indent(suites)
    body = ET.tostring(suites, encoding="unicode").replace("##[", "#&#35;[")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


HOSTILE = (
    "a \"quoted\" <tag> & 'it' ]]>",
    "tab\tcr\rnl\n",
    "\x00\x1b[31m\x7f\x85\u2028\u202e",
    "lone \ud800 \udcff",
    "##[group]x ::error::y",
    "é データ 😀 \ufffe",
    "",
)


def test_junit_written_as_text_is_the_bytes_elementtree_writes() -> None:
    for n, text in enumerate(HOSTILE):
        finding = Finding(f"change.{n}", text or "m", text or None, text, None)
        sessions = [
            session(f"s-{text}", "not_delivered", (finding, GAP)),
            session("s-2", "inconclusive", (finding,)),
            session("s-3", "pending"),
            session("s-4", "delivered", (finding,)),
            session("s-5", "delivered", override=StandingOverride("not_delivered", text, text)),
            session("s-6", "not_delivered", override=StandingOverride("delivered", None, None)),
            GateSession.missing(text or "gone"),
            GateSession(text or "x", "delivered", repo_name=text or None, trail_note=text),
        ]
        for policy in ("fail", "pass"):
            decision = decide(sessions, SELECTION, inconclusive=policy)
            assert render_junit(decision) == _junit_by_elementtree(decision), text
        for decision in (
            decide([], SELECTION),
            decide([], SELECTION, allow_empty=True),
            decide([], GateSelection(branches=(text or "b",)), unavailable=f"down: {text}"),
            decide([], SELECTION, unavailable=text, server=f"https://v.example/{text}"),
        ):
            assert render_junit(decision) == _junit_by_elementtree(decision), text


def test_text_without_control_characters_is_shown_as_it_is() -> None:
    """`shown` skips the regular expression for printable text: that holds only if every
    character `escape_controls` escapes is one Python does not print."""
    from verifier.controls import BIDI, CONTROL, escape_controls
    from verifier.formats.gate import shown

    escaped = [chr(c) for c in range(0x110000) if escape_controls(chr(c)) != chr(c)]
    assert len(escaped) > 60  # C0, DEL, C1, the line separators, the bidi controls
    assert not any(char.isprintable() for char in escaped)
    for text in (*HOSTILE, CONTROL, BIDI, "plain text"):
        assert shown(text) == escape_controls(text)


def test_json_findings_are_what_finding_to_dict_gives() -> None:
    from verifier.formats.gate import _finding_dict

    for finding in (MISSING_FILE, GAP, Finding("a.b", "m"), Finding("a.b", "m", None, "", "x")):
        assert _finding_dict(finding) == finding.to_dict()
        assert list(_finding_dict(finding)) == list(finding.to_dict())


def test_sarif_names_a_path_that_is_not_utf8_by_its_bytes() -> None:
    """A path git gave that is not UTF-8 is held as lone surrogates (``surrogateescape``):
    its URI is those bytes percent-encoded; another lone surrogate, its UTF-8 form
    (``surrogatepass``). quote() refused both, and the whole SARIF output with them."""
    for path, uri in (("src/caf\udce9.py", "src/caf%E9.py"), ("a\ud800.py", "a%ED%A0%80.py")):
        finding = Finding("change.unclaimed", "changed, not claimed", path)
        decision = decide([session("s-1", "not_delivered", (finding,))], SELECTION)
        [result] = json.loads(render_sarif(decision))["runs"][0]["results"]
        [location] = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"] == uri
